import SQLite from 'better-sqlite3';
import { readFileSync, unlinkSync } from 'node:fs';
import { ConfigError } from '../config/schema.js';
import { sqliteFolderMade, sqliteRealPath } from '../store/sqlite-folder.js';

/**
 * One `atrium serve` process per SQLite file, whatever its roles. Several processes on one file
 * would each keep their own rate-limit counts, caches and subscriptions, and SQLite has no
 * `FOR UPDATE SKIP LOCKED` for sharing a delivery queue: that is what PostgreSQL and Redis are for.
 * Short admin commands (`atrium migrate`, `users create`, ...) take no lock: each is one
 * transaction, which SQLite's WAL mode and busy timeout serialise safely beside the server.
 *
 * The lock is a small SQLite file beside the database, `<file>.serve-lock`, in which the serving
 * process holds a write transaction open for its whole life. SQLite takes that with a file lock
 * of the system's, which the system drops when the process ends however it ends (kill -9, a crash,
 * a power cut), so a lock can never outlive its holder. A pid written in a file could: after a
 * reboot or in a container the pid may belong to an unrelated live process, and a start would be
 * refused until someone deleted the file. The pid is still written inside, for the message only.
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
  const refuse = (holder: number | undefined) =>
    new ConfigError(
      'DATABASE_URL',
      `one serving process per SQLite file, and ${holder ? `process ${holder}` : 'another process'} ` +
        `already serves it (lock ${lock}); ` +
        'run several processes or roles against PostgreSQL and Redis (docs/deployment.md)',
      databaseUrl,
    );

  for (let attempt = 0; attempt < 2; attempt++) {
    let db: SQLite.Database;
    try {
      // No busy timeout: a lock someone holds is an answer, not something to wait for.
      db = new SQLite(lock, { timeout: 0 });
    } catch (err) {
      // A read-only folder (EACCES, EPERM, EROFS) or one no file can be made in (/proc): only the
      // setting, or the folder's permissions, can fix it.
      throw new ConfigError(
        'DATABASE_URL',
        `a SQLite file in a folder this process can write (cannot make the lock ${lock}: ${reason(err)})`,
        databaseUrl,
      );
    }
    try {
      if (!tryBegin(db)) throw refuse(holderOf(db));
      db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)');
      db.exec('DELETE FROM holder');
      db.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
      db.exec('COMMIT');
      // Held from here on: readers may still read the pid, no other process may begin a write.
      // A starter that slipped in between the commit and this line holds it instead.
      if (!tryBegin(db)) throw refuse(holderOf(db));
    } catch (err) {
      db.close();
      if (err instanceof ConfigError) throw err;
      if ((err as { code?: string }).code === 'SQLITE_NOTADB') {
        // A lock file written by an Atrium before this one: its pid is all there is to go by.
        takeOverLegacy(lock, refuse);
        continue;
      }
      throw new ConfigError(
        'DATABASE_URL',
        `a SQLite file whose lock ${lock} can be taken (${reason(err)})`,
        databaseUrl,
      );
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      // The file stays: removing it would let a starter that had it open lock a file nobody
      // else can see any more, beside a new one another starter makes.
      db.close();
    };
    process.once('exit', release);
    return { release };
  }
  throw new ConfigError('DATABASE_URL', `a SQLite file whose lock ${lock} can be taken`, databaseUrl);
}

function tryBegin(db: SQLite.Database): boolean {
  try {
    db.exec('BEGIN IMMEDIATE');
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return false;
    throw err;
  }
}

function holderOf(db: SQLite.Database): number | undefined {
  try {
    const row = db.prepare('SELECT pid FROM holder').get() as { pid: number } | undefined;
    return row?.pid;
  } catch {
    // The holder has not committed its pid yet.
    return undefined;
  }
}

function takeOverLegacy(lock: string, refuse: (holder: number) => Error): void {
  const holder = Number.parseInt(safeRead(lock), 10);
  if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
    throw refuse(holder);
  }
  try {
    unlinkSync(lock);
  } catch {
    // Another starting process replaced it first; the next attempt decides.
  }
}

function reason(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
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
