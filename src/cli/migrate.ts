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
    const { applied, newer } = await firstContact(store, config.databaseUrl, () => store.migrate());
    // `newer` only when there are some: migrations a newer Atrium applied, which this build leaves be.
    printResult(newer.length > 0 ? { applied, newer } : { applied });
  } finally {
    await store.close();
  }
  return 0;
}
