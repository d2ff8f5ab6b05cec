import { accessSync, constants, mkdirSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
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

/**
 * The file as the file system knows it: symbolic links (to the file or to a folder on its way)
 * resolved, so two spellings of one file are one file. A file not made yet is named through its
 * folder's real path.
 */
export function sqliteRealPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    try {
      return join(realpathSync(dirname(file)), basename(file));
    } catch {
      return file;
    }
  }
}

/**
 * Refuses, as DATABASE_URL's error, an SQLite file or folder this process may not write: a file
 * without write permission, one marked immutable, a read-only mount, a folder where the write-ahead
 * log cannot be made. access(2) answers for root too where permissions alone would not stop it.
 */
export function sqliteWritable(path: string): void {
  const file = resolve(path);
  const check = (target: string, what: string, missingIsFine: boolean) => {
    try {
      accessSync(target, constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (missingIsFine && code === 'ENOENT') return;
      throw new ConfigError(
        'DATABASE_URL',
        `an SQLite database file this process can open and write (${what} ${target} is not writable: ${code ?? (err as Error).message})`,
        `sqlite:${path}`,
      );
    }
  };
  check(file, 'the file', true);
  // The write-ahead log and its index are made beside the file.
  check(dirname(file), 'the folder', false);
}
