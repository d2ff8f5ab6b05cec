import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './io.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Strict option parsing: an unknown flag or a missing value is a usage error (exit 2). */
export function parse<O extends Options>(argv: string[], options: O, positionals = 0) {
  let parsed;
  try {
    parsed = parseArgs({
      args: negativeValuesJoined(argv, options),
      options,
      strict: true,
      allowPositionals: positionals > 0,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length > positionals)
    throw new UsageError(`unexpected argument: ${parsed.positionals[positionals]}`);
  return parsed;
}

/**
 * `--price-cents -5`: parseArgs refuses a value that starts with a dash as ambiguous and prints
 * its own advice. A negative number after an option that takes a value is that value, so it is
 * passed on as `--price-cents=-5`, and the core's range rule names the field (exit 1).
 */
function negativeValuesJoined(argv: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    if (name !== undefined && options[name]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i += 1;
    } else out.push(arg);
  }
  return out;
}

/** The ID a command takes is missing; the command line answers with the command's synopsis. */
export class MissingId extends UsageError {
  constructor() {
    super('the ID is missing');
  }
}

/** A command that takes one ID (`api-keys revoke ID`) and `options` beside it. */
export function withId<O extends Options>(argv: string[], options: O = {} as O) {
  const parsed = parse(argv, options, 1);
  const id = parsed.positionals[0];
  if (!id) throw new MissingId();
  return { id, values: parsed.values };
}

export function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.trim() === '') throw new UsageError(`--${name} is required`);
  return v;
}

export function oneOf<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  name: string,
): T | undefined {
  if (value === undefined) return undefined;
  if (!allowed.includes(value as T)) throw new UsageError(`--${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

export function integer(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be an integer`);
  return Number(value);
}
