import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { ConfigError } from '../config/schema.js';
import { sqliteFolderMade, sqliteRealPath } from '../store/sqlite-folder.js';

/**
 * One `atrium serve` process per SQLite file, whatever its roles. Several processes on one file
 * would each keep their own rate-limit counts, caches and subscriptions, and SQLite has no
 * `FOR UPDATE SKIP LOCKED` for sharing a delivery queue: that is what PostgreSQL and Redis are for.
 * Short admin commands (`atrium migrate`, `users create`, ...) take no lock: each is one
 * transaction, which SQLite's WAL mode and busy timeout serialise safely beside the server.
 */
export interface SqliteClaim {
  release(): void;
}

/** Claims the file behind `databaseUrl` for this process; undefined when nothing is shared. */
export function claimSqlite(databaseUrl: string): SqliteClaim | undefined {
  if (!databaseUrl.startsWith('sqlite:')) return undefined;
  const path = databaseUrl.slice('sqlite:'.length);
  // An in-memory database belongs to its process: there is nothing another process could share.
  if (path === '' || path === ':memory:') return undefined;
  // The lock is taken before the store opens: on a first start (`npm start` in a fresh clone, the
  // default ./data/atrium.db) the folder does not exist yet.
  // The real path, so a symbolic link to the file (or to its folder) is the same file, not a second
  // one another server may take.
  const lock = `${sqliteRealPath(sqliteFolderMade(path))}.serve-lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        try {
          if (readFileSync(lock, 'utf8').trim() === String(process.pid)) unlinkSync(lock);
        } catch {
          // Already gone.
        }
      };
      process.once('exit', release);
      return { release };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') {
        // A read-only folder (EACCES, EPERM, EROFS) or one no file can be made in (/proc: ENOENT):
        // only the setting, or the folder's permissions, can fix it.
        throw new ConfigError(
          'DATABASE_URL',
          `a SQLite file in a folder this process can write (cannot make the lock ${lock}: ${code ?? (err as Error).message})`,
          databaseUrl,
        );
      }
    }
    const holder = Number.parseInt(safeRead(lock), 10);
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
      throw new ConfigError(
        'DATABASE_URL',
        `one serving process per SQLite file, and process ${holder} already serves it (lock ${lock}); ` +
          'run several processes or roles against PostgreSQL and Redis (docs/deployment.md)',
        databaseUrl,
      );
    }
    // The holder is gone (a crash or kill -9 left the file): take over.
    try {
      unlinkSync(lock);
    } catch {
      // Another starting process removed it first; the next attempt decides.
    }
  }
  throw new ConfigError('DATABASE_URL', `a SQLite file whose lock ${lock} can be taken`, databaseUrl);
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
