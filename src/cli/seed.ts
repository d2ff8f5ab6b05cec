import { loadConfig } from '../config/load.js';
import { closeServices, createServices } from '../compose.js';
import { oneOf, parse } from './args.js';
import { printResult } from './io.js';
import { seedDemoData } from '../seed/seed.js';

export async function runSeed(argv: string[]): Promise<number> {
  const { values } = parse(argv, { size: { type: 'string' } });
  const size = oneOf(values.size, ['small', 'large'] as const, 'size') ?? 'small';
  const services = await createServices(loadConfig(), { migrate: true });
  try {
    const progress = process.stderr.isTTY
      ? (line: string) => process.stderr.write(`\r${line}\x1b[K`)
      : undefined;
    const result = await seedDemoData(services, { size, progress });
    if (progress) process.stderr.write('\n');
    printResult(result);
  } finally {
    await closeServices(services);
  }
  return 0;
}
