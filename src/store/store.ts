import SQLite from 'better-sqlite3';
import {
  Kysely,
  type KyselyPlugin,
  Migrator,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  PostgresDialect,
  type QueryResult,
  type RootOperationNode,
  SqliteDialect,
  sql,
  type UnknownRow,
} from 'kysely';
import pg from 'pg';
import { withoutPassword } from '../config/redact.js';
import { ConfigError } from '../config/schema.js';
import { DomainError } from '../domain/errors.js';
import type { Dialect } from './dialect.js';
import { migrationsFor, StaticMigrationProvider } from './migrations/index.js';
import { pgPoolConfig } from './pg-options.js';
import { sqliteFolderMade, sqliteWritable } from './sqlite-folder.js';
import { guardedByRequestScope } from './request-guard.js';
import { immediateTransactions } from './sqlite-immediate.js';
import type { Database } from './types.js';

export type Db = Kysely<Database>;

export interface MigrationOutcome {
  /** Migrations applied by this call, in order. */
  applied: string[];
  /** Migrations recorded in the database by a newer Atrium, unknown to this build; sorted. */
  newer: string[];
}

export interface Store {
  readonly db: Db;
  readonly dialect: Dialect;
  /**
   * Applies pending migrations; returns the names applied now, and those the database records that
   * this build does not know and that sort after all it knows (a newer Atrium migrated it: see
   * `checkRecordedMigrations`). Refuses, as DATABASE_URL's error, a database another branch migrated.
   */
  migrate(): Promise<MigrationOutcome>;
  /** Answers when the database answers a trivial query; throws otherwise. */
  ping(): Promise<void>;
  /** Pool figures for /metrics (PostgreSQL only). */
  poolStats(): { total: number; idle: number; waiting: number } | undefined;
  close(): Promise<void>;
  /** SQL statements sent since the store opened (tests hold batching to a constant count with it). */
  statementCount(): number;
  /**
   * A number that changes once another connection has committed to the database: an admin command
   * beside the one SQLite serving process, which cannot reach its in-process caches. Undefined on
   * PostgreSQL: nothing short of a round trip to the server tells of another process's commit, so a
   * cache kept in this process's memory cannot be kept fresh there (only one shared through Redis).
   */
  readonly foreignCommits: (() => number) | undefined;
  /**
   * PostgreSQL only: cancels every statement of this database whose text contains `mark`, from a
   * connection of its own (never the pool's, which the statements to cancel may fill). Resolves
   * whatever happens: a cancel is best effort.
   */
  readonly cancelMarked: ((mark: string) => Promise<void>) | undefined;
  /**
   * Calls `listener` after every statement the database answered (a failed one does not count),
   * whoever sent it; returns the function that stops it. A component that logs a database outage
   * once (StoreOutageLog) ends it here, at the first answer, without a probe of its own.
   */
  onAnswer(listener: () => void): () => void;
}

/** Kysely's log hook, used only to count statements; it runs once per executed query. */
function statementCounter() {
  const counter = { n: 0 };
  return { counter, log: () => void (counter.n += 1) };
}

// COUNT(*) and other int8 results arrive as strings by default; every int8 here fits a double.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

export interface StoreOptions {
  poolSize?: number;
  /** Kysely plugins over every query (tests use one to hold a statement at a chosen point). */
  plugins?: KyselyPlugin[];
}

/**
 * A plugin, last of all, whose result step runs only when the statement answered and every other
 * plugin passed its result on: there it tells the store's `onAnswer` listeners.
 */
class AnswerListeners implements KyselyPlugin {
  readonly listeners = new Set<() => void>();
  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    return node;
  }
  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    for (const listener of this.listeners) listener();
    return result;
  }
}

export function openStore(databaseUrl: string, options: StoreOptions = {}): Store {
  const answers = new AnswerListeners();
  const plugins = [...(options.plugins ?? []), answers];
  if (databaseUrl.startsWith('sqlite:'))
    return openSqlite(databaseUrl.slice('sqlite:'.length), plugins, answers);
  return openPostgres(databaseUrl, options.poolSize ?? 10, plugins, answers);
}

function openSqlite(path: string, plugins: KyselyPlugin[], answers: AnswerListeners): Store {
  const memory = path === ':memory:' || path === '';
  if (!memory) sqliteFolderMade(path);
  const conn = openSqliteFile(memory ? ':memory:' : path);
  const { counter, log } = statementCounter();
  const db = new Kysely<Database>({
    dialect: guardedByRequestScope(
      immediateTransactions(new SqliteDialect({ database: withStatementCache(conn) })),
    ),
    plugins,
    log,
  });
  // data_version moves only for commits made through other connections, never this one's own.
  const dataVersion = conn.prepare('PRAGMA data_version').pluck();
  return makeStore(
    db,
    'sqlite',
    `sqlite:${path}`,
    () => undefined,
    counter,
    answers,
    () => dataVersion.get() as number,
    memory ? undefined : (apply) => migrateSqliteExclusively(db, conn, `sqlite:${path}`, apply),
  );
}

/** How long a starting process waits for another one's migration to finish before it gives up. */
const MIGRATION_LOCK_WAIT_MS = 60_000;
const BUSY_TIMEOUT_MS = 5000;

/**
 * Migrates an SQLite file safely beside other processes starting on it at the same moment (a
 * fresh file under `atrium serve` and `atrium seed`, or eight admin commands at once). Kysely's
 * migration lock is a no-op on SQLite and runs each statement on its own there, so two starters
 * would both see the file empty and both create its tables. Here the whole run, Kysely's own
 * bookkeeping tables included, is one `BEGIN IMMEDIATE` transaction: SQLite's write lock, which
 * every other process waits for (up to MIGRATION_LOCK_WAIT_MS). Inside it the Migrator reads what
 * is pending afresh, so a process that waited finds nothing left to do; and a failure rolls back
 * whole (SQLite's DDL is transactional), leaving the file as it was.
 *
 * The store's one connection is held meanwhile, so no other statement of this process lands in
 * the transaction; the Migrator gets a Kysely of its own over the same connection (one bound to
 * the held connection would wait for itself).
 */
async function migrateSqliteExclusively(
  db: Db,
  conn: SQLite.Database,
  databaseUrl: string,
  apply: (db: Db) => Promise<string[]>,
): Promise<string[]> {
  return db.connection().execute(async () => {
    const own = new Kysely<Database>({ dialect: new SqliteDialect({ database: conn }) });
    conn.pragma(`busy_timeout = ${MIGRATION_LOCK_WAIT_MS}`);
    try {
      conn.exec('BEGIN IMMEDIATE');
    } finally {
      conn.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
    try {
      refuseForeignSqlite(conn, databaseUrl);
      const applied = await apply(own);
      conn.exec('COMMIT');
      return applied;
    } catch (err) {
      if (conn.inTransaction) conn.exec('ROLLBACK');
      throw err;
    }
    // `own` is not destroyed: that would close the connection the store goes on using.
  });
}

/**
 * A file with tables but without Kysely's migration table was not made by Atrium (DATABASE_URL
 * names someone else's database): refused as DATABASE_URL's error before anything is written to it,
 * rather than an internal error halfway through the first migration.
 */
function refuseForeignSqlite(conn: SQLite.Database, databaseUrl: string): void {
  const tables = conn
    .prepare(
      "select name from sqlite_master where type in ('table', 'view') and name not like 'sqlite\\_%' escape '\\'",
    )
    .pluck()
    .all() as string[];
  if (tables.length === 0 || tables.includes('kysely_migration')) return;
  const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? ', ...' : '');
  throw new ConfigError(
    'DATABASE_URL',
    `a new SQLite file or one Atrium made; this file holds tables Atrium did not create (${shown})`,
    databaseUrl,
  );
}

/**
 * Opens the file and sets the connection up. A path that is a folder, a file that is not a database,
 * or one this process may not write is DATABASE_URL's error (one line naming the variable), not an
 * internal error: nothing but the setting can fix it.
 */
function openSqliteFile(path: string): SQLite.Database {
  let conn: SQLite.Database | undefined;
  // SQLite opens a file it may not write read-only without a word, and fails only at the first
  // write (a migration, or an admin command's insert after it printed nothing yet).
  if (path !== ':memory:') sqliteWritable(path);
  try {
    conn = new SQLite(path);
    if (path !== ':memory:') conn.pragma('journal_mode = WAL');
    conn.pragma('foreign_keys = ON');
    conn.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    conn.pragma('synchronous = NORMAL');
    return conn;
  } catch (err) {
    conn?.close();
    throw new ConfigError(
      'DATABASE_URL',
      `an SQLite database file this process can open and write (${(err as Error).message})`,
      `sqlite:${path}`,
    );
  }
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query afresh; better-sqlite3 statements can be reused, and preparing is a
 * large share of a short query's cost. The SQL text is the key (values are bound parameters), so the
 * cache holds one statement per query shape.
 */
function withStatementCache(conn: SQLite.Database): SQLite.Database {
  const cache = new Map<string, SQLite.Statement>();
  return new Proxy(conn, {
    get(target, property) {
      if (property === 'prepare') {
        return (sqlText: string) => {
          let statement = cache.get(sqlText);
          if (statement === undefined) {
            statement = target.prepare(sqlText);
            if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
            cache.set(sqlText, statement);
          }
          return statement;
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * PostgreSQL text cannot hold NUL and fails the whole statement ("invalid byte sequence"), which
 * would surface as a 500. A parameter with NUL is refused as invalid input before it is sent, for
 * every surface at once; SQLite stores NUL and needs no guard.
 */
function refusingNul(pool: pg.Pool): pg.Pool {
  const check = (values: unknown) => {
    if (!Array.isArray(values)) return;
    for (const v of values) {
      if (typeof v === 'string' && v.includes('\u0000')) {
        throw new DomainError('validation_error', 'Text must not contain NUL characters.', [
          { field: null, message: 'a value contains a NUL character', code: 'invalid_characters' },
        ]);
      }
    }
  };
  return new Proxy(pool, {
    get(target, property) {
      if (property !== 'connect') {
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return async () => {
        const client = await target.connect();
        return new Proxy(client, {
          get(c, p) {
            const value = Reflect.get(c, p, c) as unknown;
            if (p !== 'query' || typeof value !== 'function') {
              return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(c) : value;
            }
            return (config: unknown, values?: unknown) => {
              check(values ?? (config as { values?: unknown } | null)?.values);
              return (value as (...a: unknown[]) => unknown).call(c, config, values);
            };
          },
        });
      };
    },
  });
}

function openPostgres(url: string, max: number, plugins: KyselyPlugin[], answers: AnswerListeners): Store {
  const pool = new pg.Pool({ ...pgPoolConfig(url), max });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  // pg-pool takes its error listener off a client while it is lent out; if the server goes away
  // then, the client emits 'error' with nobody listening, which would end the process. The listener
  // is added as the client is born ('connect' is emitted before it is first lent): a FATAL that
  // arrives in the same read as the connection's first ReadyForQuery (pg_terminate_backend under
  // load) came before a listener added by the borrower could be. The query in flight, if any, is
  // rejected anyway, and the next one on this client fails with an error isStoreUnavailable knows.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const { counter, log } = statementCounter();
  const db = new Kysely<Database>({
    dialect: guardedByRequestScope(new PostgresDialect({ pool: refusingNul(pool) })),
    plugins,
    log,
  });
  return makeStore(
    db,
    'postgres',
    url,
    () => ({
      total: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
    }),
    counter,
    answers,
    undefined,
    undefined,
    (mark) => cancelMarkedStatements(url, mark),
  );
}

/** How long a cancel may take to connect before it is given up. */
const CANCEL_CONNECT_MS = 5_000;

/**
 * `Store.cancelMarked` on PostgreSQL. Its own short-lived connection, not the pool's: when the
 * statements to cancel hold every pooled connection (searches stuck behind a lock, say), a cancel
 * waiting for one of them would never run, and those statements would hold the pool for good.
 */
async function cancelMarkedStatements(url: string, mark: string): Promise<void> {
  const client = new pg.Client({ ...pgPoolConfig(url), connectionTimeoutMillis: CANCEL_CONNECT_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(
      `select pg_cancel_backend(pid) from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and query like $1`,
      [`%${mark}%`],
    );
  } catch {
    // Best effort: the statement then runs to its end, as it would have without a cancel.
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The names in Kysely's migration table, or none when it does not exist yet (a fresh database). */
async function recordedMigrations(db: Db, dialect: Dialect): Promise<string[]> {
  const exists =
    dialect === 'sqlite'
      ? sql<{
          found: number;
        }>`select 1 as found from sqlite_master where type = 'table' and name = 'kysely_migration'`
      : sql<{ found: number }>`select 1 as found where to_regclass('kysely_migration') is not null`;
  if ((await exists.execute(db)).rows.length === 0) return [];
  const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  return rows.map((r) => r.name);
}

/**
 * What the database's recorded migrations say about the build that made it, before Kysely sees
 * them (Kysely refuses any recorded name it does not know as "corrupted migrations", an internal
 * error, which would keep an old build from starting on a database a newer one migrated).
 *
 * Migrations are append-only and additive (docs/architecture.md), so a database migrated by a newer
 * Atrium serves an older build unchanged: recorded names this build does not know, all sorting after
 * every name it knows, with every migration it knows applied, are `newer` and accepted. Anything
 * else unknown means another line of Atrium migrated it, and this build cannot know what its
 * migrations changed: an unknown name sorting before one this build knows (a different branch), or
 * newer names while one of this build's own is missing (a newer build of the same line would have
 * applied it). That is refused as DATABASE_URL's error, naming the migrations, before anything is
 * written. Returns the pending known migrations and the newer ones.
 */
export function checkRecordedMigrations(
  known: readonly string[],
  recorded: readonly string[],
  databaseUrl: string,
): { pending: string[]; newer: string[] } {
  const knownSet = new Set(known);
  const recordedSet = new Set(recorded);
  const unknown = recorded.filter((name) => !knownSet.has(name)).sort();
  const pending = [...known].sort().filter((name) => !recordedSet.has(name));
  if (unknown.length === 0) return { pending, newer: [] };
  const lastKnown = [...known].sort().at(-1) ?? '';
  const refuse = (why: string) =>
    new ConfigError(
      'DATABASE_URL',
      `a database migrated by this build of Atrium, an earlier one or a newer one of the same line; ${why}`,
      withoutPassword(databaseUrl),
    );
  const before = unknown.filter((name) => name < lastKnown);
  if (before.length > 0)
    throw refuse(
      `it records migrations this build does not know that sort before its own ${lastKnown} ` +
        `(${before.join(', ')}): another branch of Atrium migrated it`,
    );
  if (pending.length > 0)
    throw refuse(
      `it records migrations newer than this build (${unknown.join(', ')}) but not this build's ` +
        `${pending.join(', ')}: a build without them, of another branch, migrated it`,
    );
  return { pending: [], newer: unknown };
}

function makeStore(
  db: Db,
  dialect: Dialect,
  databaseUrl: string,
  poolStats: Store['poolStats'],
  counter: { n: number },
  answers: AnswerListeners,
  foreignCommits?: () => number,
  /** Runs `apply` as the one migrator of the database (SQLite files); PostgreSQL's Kysely locks itself. */
  exclusively?: (apply: (db: Db) => Promise<string[]>) => Promise<string[]>,
  cancelMarked?: (mark: string) => Promise<void>,
): Store {
  return {
    db,
    dialect,
    poolStats,
    foreignCommits,
    cancelMarked,
    statementCount: () => counter.n,
    onAnswer(listener) {
      // A function of its own, so one listener given twice is two subscriptions, each stoppable.
      const own = () => listener();
      answers.listeners.add(own);
      return () => void answers.listeners.delete(own);
    },
    async migrate() {
      // Numbers are handed out to parallel work, so a database may have a later one applied before
      // an earlier one lands; each migration stands alone, so that order is harmless.
      const migratorOn = (on: Db) =>
        new Migrator({
          db: on,
          provider: new StaticMigrationProvider(dialect),
          allowUnorderedMigrations: true,
        });
      const apply = async (on: Db) => {
        const { error, results } = await migratorOn(on).migrateToLatest();
        if (error) throw error instanceof Error ? error : new Error(String(error));
        return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
      };
      const known = Object.keys(migrationsFor(dialect));
      const check = async () =>
        checkRecordedMigrations(known, await recordedMigrations(db, dialect), databaseUrl);
      const { pending, newer } = await check();
      // Up to date (every start but the first after an upgrade), or migrated by a newer Atrium: no
      // write lock is needed, and none is waited for behind another process's long write.
      if (pending.length === 0) return { applied: [], newer };
      try {
        return { applied: await (exclusively ? exclusively(apply) : apply(db)), newer: [] };
      } catch (err) {
        // Another build migrated the database between the check and the lock (an upgrade's
        // `atrium migrate` beside this start): judged again as it is now.
        if (!(err instanceof Error && err.message.startsWith('corrupted migrations'))) throw err;
        const now = await check();
        if (now.pending.length > 0) throw err;
        return { applied: [], newer: now.newer };
      }
    },
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}
