import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrationsFor } from '../../src/store/migrations/index.js';
import { ensureBuilt } from '../helpers/build.js';
import { root } from '../helpers/cli.js';
import { freshDatabase, testDialect, type TestDatabase } from '../helpers/database.js';

/**
 * Two processes migrating one fresh database at the same moment: `atrium migrate` twice, or
 * `atrium migrate` beside a starting `atrium serve` (which migrates at start). The overlap is
 * forced rather than hoped for: the test holds the lock the migrators take (SQLite's write lock,
 * Kysely's advisory lock on PostgreSQL) until both processes are seen waiting for it, then lets
 * go, so both go on from the same point. Kysely's own lock does nothing on SQLite; there the store
 * runs the migrations inside one BEGIN IMMEDIATE transaction (src/store/store.ts).
 *
 * Each scenario starts from two states. A fresh database, as a first start meets it. And one where
 * Kysely's bookkeeping tables (kysely_migration, kysely_migration_lock and its row) exist but no
 * migration has run: the moment just after the first of two starters made them. From there, under
 * Kysely's no-op SQLite lock alone (the store before 572cfa8), both processes read "nothing
 * applied" before either writes, and the one let through second failed on `table "settings"
 * already exists` every time; from a fresh file it failed in most rounds.
 */

/** Kysely's PostgresAdapter takes `pg_advisory_lock` on this key for the migration. */
const KYSELY_MIGRATION_LOCK = '3853314791062309107';

interface Running {
  pid: number;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  kill(): void;
}

function start(args: string[], env: Record<string, string>, cwd: string): Running {
  const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    pid: child.pid!,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    kill: () => child.kill('SIGTERM'),
  };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Until `done()` holds (true), or a process ends first (false). Bounded
 * only so a hang fails with a message instead of the test's timeout.
 */
async function until(
  what: string,
  done: () => Promise<boolean> | boolean,
  processes: Running[],
): Promise<boolean> {
  let ended = false;
  for (const p of processes) void p.exited.then(() => (ended = true));
  for (let i = 0; i < 600; i++) {
    if (await done()) return true;
    if (ended) return false;
    await pause(50);
  }
  throw new Error(`never saw ${what}:\n${processes.map((p) => p.stderr()).join('\n')}`);
}

/**
 * The process's main thread is asleep in the kernel's nanosleep: better-sqlite3 is synchronous,
 * so that is SQLite's busy handler, waiting for the write lock the test holds.
 */
function sleepingInSqlite(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('nanosleep');
  } catch {
    return false;
  }
}

/** The schema, as a sorted list of table.column (PostgreSQL) or type:name (SQLite) lines. */
async function schemaOf(url: string): Promise<string[]> {
  if (url.startsWith('sqlite:')) {
    const db = new SQLite(url.slice('sqlite:'.length), { readonly: true });
    try {
      return (
        db
          .prepare(
            "select type || ':' || name || ':' || coalesce(sql, '') as s from sqlite_master order by 1",
          )
          .pluck()
          .all() as string[]
      ).filter((s) => !s.includes('kysely_migration_lock'));
    } finally {
      db.close();
    }
  }
  return (
    await query(
      url,
      `select table_name || '.' || column_name || ':' || data_type as s from information_schema.columns
        where table_schema = 'public' order by 1`,
    )
  ).map((r) => r.s as string);
}

async function recorded(url: string): Promise<string[]> {
  if (url.startsWith('sqlite:')) {
    const db = new SQLite(url.slice('sqlite:'.length), { readonly: true });
    try {
      return db.prepare('select name from kysely_migration order by name').pluck().all() as string[];
    } finally {
      db.close();
    }
  }
  return (await query(url, 'select name from kysely_migration order by name')).map((r) => r.name as string);
}

async function query(url: string, text: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

/** The migrators' lock, held by the test on `url`'s database until `release()`. */
interface Held {
  /** Both processes are waiting for it. */
  waitedForBy(processes: Running[]): Promise<boolean>;
  release(): Promise<void>;
}

type State = 'fresh' | 'bookkeeping made';

/** Kysely's Migrator with no migrations: it makes its bookkeeping tables and lock row, nothing else. */
async function makeBookkeeping(dialect: SqliteDialect | PostgresDialect): Promise<void> {
  const db = new Kysely<unknown>({ dialect });
  try {
    const none = { getMigrations: async () => ({}) };
    const { error } = await new Migrator({ db, provider: none }).migrateToLatest();
    if (error) throw error;
  } finally {
    // On SQLite the connection is the caller's, and stays open.
    if (dialect instanceof PostgresDialect) await db.destroy();
  }
}

async function holdMigrationLock(url: string, state: State): Promise<Held> {
  if (url.startsWith('sqlite:')) {
    // The file as the store makes it (WAL, so the processes can read what is pending while the
    // test holds the write lock), then the write lock itself.
    const db = new SQLite(url.slice('sqlite:'.length));
    db.pragma('journal_mode = WAL');
    if (state === 'bookkeeping made') await makeBookkeeping(new SqliteDialect({ database: db }));
    db.exec('BEGIN IMMEDIATE');
    return {
      waitedForBy: async (processes) => processes.every((p) => sleepingInSqlite(p.pid)),
      release: async () => {
        db.exec('COMMIT');
        db.close();
      },
    };
  }
  if (state === 'bookkeeping made')
    await makeBookkeeping(new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`select pg_advisory_lock(${KYSELY_MIGRATION_LOCK})`);
  return {
    waitedForBy: async (processes) => {
      const { rows } = await client.query(
        `select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted
           and database = (select oid from pg_database where datname = current_database())`,
      );
      return rows[0].n >= processes.length;
    },
    release: async () => {
      await client.query(`select pg_advisory_unlock(${KYSELY_MIGRATION_LOCK})`);
      await client.end();
    },
  };
}

const known = Object.keys(migrationsFor(testDialect())).sort();
const rounds: [string, State][] = [
  ['1 (fresh)', 'fresh'],
  ['2 (bookkeeping made)', 'bookkeeping made'],
  ['3 (fresh)', 'fresh'],
  ['4 (bookkeeping made)', 'bookkeeping made'],
];

describe('two processes migrating one fresh database at the same moment', { timeout: 300_000 }, () => {
  let dir: string;
  let reference: string[];
  const databases: TestDatabase[] = [];

  /** A fresh database: a new file, or a new PostgreSQL database dropped afterwards. */
  async function fresh(name: string): Promise<string> {
    if (testDialect() === 'sqlite') return `sqlite:${join(dir, `${name.replace(/\W+/g, '-')}.db`)}`;
    const db = await freshDatabase();
    databases.push(db);
    return db.url;
  }

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'atrium-migrate-race-'));
    // The schema one `atrium migrate` alone makes, for the raced ones to be compared with.
    const url = await fresh('reference');
    const alone = start(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' }, root);
    expect(await alone.exited, alone.stderr()).toBe(0);
    reference = await schemaOf(url);
    expect(reference.length).toBeGreaterThan(0);
  });
  afterAll(async () => {
    for (const db of databases) await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('`atrium migrate` twice: both exit 0, one applies every migration, the other finds none left', async () => {
    for (const [round, state] of rounds) {
      const url = await fresh(`migrate-twice-${round}`);
      const held = await holdMigrationLock(url, state);
      const env = { DATABASE_URL: url, LOG_LEVEL: 'silent' };
      const both = [start(['migrate'], env, root), start(['migrate'], env, root)];
      let overlapped: boolean;
      try {
        overlapped = await until(
          'both `atrium migrate` waiting for the lock',
          () => held.waitedForBy(both),
          both,
        );
      } finally {
        await held.release();
      }
      const codes = await Promise.all(both.map((p) => p.exited));
      expect(codes, `round ${round}: ${both.map((p) => p.stderr()).join('\n')}`).toEqual([0, 0]);
      // Neither ended while the test held the lock: both were there, waiting, when it was let go.
      expect(overlapped, `round ${round}`).toBe(true);
      const applied = both.map((p) => (JSON.parse(p.stdout()) as { applied: string[] }).applied.sort());
      expect(
        applied.sort((a, b) => a.length - b.length),
        `round ${round}`,
      ).toEqual([[], known]);
      expect(await recorded(url), `round ${round}`).toEqual(known);
      expect(await schemaOf(url), `round ${round}`).toEqual(reference);
    }
  });

  it('`atrium serve` starting while `atrium migrate` runs: both succeed, the schema is made once', async () => {
    for (const [round, state] of rounds) {
      const url = await fresh(`serve-beside-migrate-${round}`);
      const held = await holdMigrationLock(url, state);
      const port = 20000 + Math.floor(Math.random() * 20000);
      const server = start(
        ['serve'],
        { DATABASE_URL: url, HOST: '127.0.0.1', PORT: String(port), GRPC_PORT: String(port + 1) },
        dir,
      );
      const migrate = start(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' }, root);
      const both = [server, migrate];
      try {
        let overlapped: boolean;
        try {
          overlapped = await until(
            'serve and migrate both waiting for the lock',
            () => held.waitedForBy(both),
            both,
          );
        } finally {
          await held.release();
        }
        expect(await migrate.exited, `round ${round}: ${migrate.stderr()}`).toBe(0);
        expect(overlapped, `round ${round}: ${server.stderr()}`).toBe(true);
        await until('`atrium started`', () => server.stderr().includes('"atrium started"'), [server]);
        expect(server.stderr(), `round ${round}`).toContain('"atrium started"');
        const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
        expect(ready.status, `round ${round}`).toBe(200);
      } finally {
        server.kill();
      }
      expect(await server.exited, `round ${round}: ${server.stderr()}`).toBe(0);
      expect(await recorded(url), `round ${round}`).toEqual(known);
      expect(await schemaOf(url), `round ${round}`).toEqual(reference);
    }
  });
});
