import { readFileSync } from 'node:fs';
import { parse } from 'dotenv';
import { ConfigError } from './schema.js';

/** A key the file sets that looks like a misspelt setting, and the setting it probably means. */
export interface EnvFileTypo {
  key: string;
  line: number;
  meant: string;
}

const ASSIGNMENT = /^\s*(?:export\s+)?[A-Za-z_][\w.-]*(?:\s*=|:\s)/;

/**
 * Reads a `.env` file into `env` without overriding what the environment already sets.
 *
 * dotenv on its own skips a line it cannot read and ignores a file it cannot open, so `PORT 4000`
 * or a `.env` the user may not read would start the service on the defaults with no word said.
 * Both stop the start here instead, naming the file and the line; a missing file is fine.
 */
export function readEnvFile(path: string, env: NodeJS.ProcessEnv, known: readonly string[]): EnvFileTypo[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new ConfigError(path, 'a readable file of NAME=value lines', (err as Error).message);
  }
  const lines = text.split(/\r?\n/);
  const lineOf = new Map<string, number>();
  let open: string | undefined; // the quote a multi-line value is waiting for
  lines.forEach((line, i) => {
    if (open !== undefined) {
      if (line.includes(open)) open = undefined;
      return;
    }
    if (line.trim() === '' || line.trim().startsWith('#')) return;
    const assignment = ASSIGNMENT.exec(line);
    if (!assignment) {
      throw new ConfigError(`${path} line ${i + 1}`, 'NAME=value, a # comment or an empty line', line.trim());
    }
    const key = assignment[0].replace(/^\s*(?:export\s+)?/, '').replace(/\s*[=:]\s*$/, '');
    lineOf.set(key, i + 1);
    const value = line.slice(assignment[0].length).trimStart();
    const quote = value[0];
    if ((quote === '"' || quote === "'" || quote === '`') && !value.slice(1).includes(quote)) open = quote;
  });

  const values = parse(text);
  for (const [key, value] of Object.entries(values)) {
    if (env[key] === undefined) env[key] = value;
  }
  return Object.keys(values).flatMap((key) => {
    if (known.includes(key)) return [];
    // One slip in a short name (HOST, PORT), two in a long one; HOME is not a misspelt HOST.
    const meant = known.find((name) => editDistance(key.toUpperCase(), name) <= (name.length < 6 ? 1 : 2));
    return meant === undefined ? [] : [{ key, line: lineOf.get(key) ?? 0, meant }];
  });
}

/** Levenshtein distance; the names compared are a few dozen characters at most. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
