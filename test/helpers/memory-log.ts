import { Writable } from 'node:stream';
import { createLogger } from '../../src/observability/logger.js';

/** A real pino logger of Atrium's whose JSON lines are kept, parsed, for a test to read. */
export function memoryLog(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger(level, stream) };
}
