import { loadConfig } from '../config/load.js';
import { firstContact } from '../store/first-contact.js';
import { openStore } from '../store/store.js';
import { parse } from './args.js';
import { printResult } from './io.js';

export async function runMigrate(argv: string[]): Promise<number> {
  parse(argv, {});
  const config = loadConfig();
  const store = openStore(config.databaseUrl);
  try {
    printResult({ applied: await firstContact(store, config.databaseUrl, () => store.migrate()) });
  } finally {
    await store.close();
  }
  return 0;
}
