import { ConfigError } from '../config/schema.js';
import { DomainError } from '../domain/errors.js';
import { restDetails } from '../http/rest/field-names.js';

/** Bad command-line usage: exit 2. */
export class UsageError extends Error {}

export function printResult(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** One JSON line on stderr and the exit code decisions §2 sets: 2 for usage, 1 for everything else. */
export function reportFailure(err: unknown): number {
  if (err instanceof UsageError) {
    process.stderr.write(`${JSON.stringify({ error: 'usage', message: err.message })}\n`);
    return 2;
  }
  if (err instanceof ConfigError) {
    process.stderr.write(
      `${JSON.stringify({ error: 'invalid_configuration', variable: err.variable, message: err.message })}\n`,
    );
    return 1;
  }
  if (err instanceof DomainError) {
    // The commands print REST's shapes (decisions §2), so their errors use REST's field names too.
    const { message, details } = restDetails(err);
    const body: Record<string, unknown> = { error: err.code, message };
    if (details.length > 0) body.details = details;
    process.stderr.write(`${JSON.stringify(body)}\n`);
    return 1;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${JSON.stringify({ error: 'internal_error', message })}\n`);
  return 1;
}
