import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../config/schema.js';

/**
 * Makes the folder an SQLite file lives in, so a first start with the default ./data/atrium.db
 * works; a path whose folder cannot be made is a configuration error naming DATABASE_URL, not a
 * crash. Returns the file's absolute path.
 */
export function sqliteFolderMade(path: string): string {
  const file = resolve(path);
  try {
    mkdirSync(dirname(file), { recursive: true });
  } catch (err) {
    throw new ConfigError(
      'DATABASE_URL',
      `sqlite:<path> in a folder that exists or can be made (cannot make ${dirname(file)}: ${(err as Error).message})`,
      `sqlite:${path}`,
    );
  }
  return file;
}
