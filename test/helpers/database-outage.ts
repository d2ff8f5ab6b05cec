import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs } from 'kysely';
import pg from 'pg';
import { createAtrium, type Atrium, type ServerRole, type ServicesOptions } from '../../src/compose.js';
import { parseConfig } from '../../src/config/schema.js';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from './database.js';
import { forSuite } from './suite.js';
import { TcpProxy } from './tcp-proxy.js';
import { until } from './wait.js';

/** The PostgreSQL server the outage tests reach through a proxy, whatever dialect the run uses. */
export const OUTAGE_ADMIN_URL = process.env.TEST_DATABASE_URL?.startsWith('postgres')
  ? process.env.TEST_DATABASE_URL
  : 'postgres://postgres@127.0.0.1:5432/postgres';

/** Why the outage tests cannot run here (no PostgreSQL answering), or undefined. */
export async function postgresMissing(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: OUTAGE_ADMIN_URL });
  try {
    await client.connect();
    return undefined;
  } catch (err) {
    const reason = `PostgreSQL at ${OUTAGE_ADMIN_URL} does not answer: ${(err as Error).message}`;
    // On CI a missing prerequisite fails the run; only a local run may skip, and it says why.
    if (process.env.CI === 'true' || process.env.CI === '1')
      throw new Error(`${reason}. CI must run the outage tests.`);
    process.stderr.write(`[skipped] database outage tests: ${reason}.
`);
    return reason;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface AtriumBehindProxy {
  atrium: Atrium;
  /** Makes the database unreachable for this Atrium: its connections drop, new ones are refused. */
  cutDatabase(): Promise<void>;
  /** Makes it reachable again, at the same address. */
  restoreDatabase(): Promise<void>;
  /**
   * Makes the database hang for this Atrium, as a stopped server (SIGSTOP) does: connections stay
   * open and new ones are accepted, but nothing is answered (TcpProxy.hang). Resume before `stop`.
   */
  hangDatabase(): void;
  /** Answers again, what was held back first (a SIGCONT). */
  resumeDatabase(): void;
  stop(): Promise<void>;
}

/**
 * An Atrium on a fresh PostgreSQL database that it reaches through a TCP proxy of the test's own,
 * so the test can take the database away from it (docs/deployment.md, "When Redis or PostgreSQL
 * fails") without stopping a server anyone else uses.
 */
export async function startAtriumBehindProxy(
  env: Record<string, string> = {},
  roles: readonly ServerRole[] = ['api', 'auth'],
  options: ServicesOptions = {},
): Promise<AtriumBehindProxy> {
  const database: TestDatabase = await freshDatabase({ adminUrl: OUTAGE_ADMIN_URL });
  const url = new URL(database.url);
  const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
  url.host = `127.0.0.1:${proxy.port}`;
  let atrium: Atrium;
  try {
    atrium = await createAtrium(
      parseConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        DATABASE_URL: url.toString(),
        PORT: '0',
        GRPC_PORT: '0',
        HOST: '127.0.0.1',
        ...env,
      }),
      roles,
      options,
    );
  } catch (err) {
    await proxy.cut();
    await database.drop();
    throw err;
  }
  return {
    atrium,
    cutDatabase: () => proxy.cut(),
    restoreDatabase: () => proxy.restore(),
    hangDatabase: () => proxy.hang(),
    resumeDatabase: () => proxy.resume(),
    async stop() {
      await atrium.close();
      await proxy.cut().catch(() => undefined);
      await database.drop();
    },
  };
}

export interface ListeningBehindProxy extends AtriumBehindProxy {
  /** Base URL of the HTTP server, such as http://127.0.0.1:1234 (no path). */
  httpUrl: string;
  /** host:port of the gRPC server, when the grpc role is on. */
  grpcAddress: string | undefined;
}

/** startAtriumBehindProxy, listening on its ports (stopped again if it cannot listen). */
export async function startListeningBehindProxy(
  env: Record<string, string> = {},
  roles: readonly ServerRole[] = ['api', 'auth'],
  options: ServicesOptions = {},
): Promise<ListeningBehindProxy> {
  const behind = await startAtriumBehindProxy(env, roles, options);
  try {
    const { httpUrl, grpcAddress } = await behind.atrium.listen();
    return { ...behind, httpUrl: httpUrl!, grpcAddress };
  } catch (err) {
    await behind.stop();
    throw err;
  }
}

/**
 * A listening Atrium behind the database proxy (startListeningBehindProxy) for the enclosing
 * describe block (see forSuite): started before its tests, stopped after them.
 */
export function behindProxyForSuite(
  env: Record<string, string> = {},
  roles: readonly ServerRole[] = ['api', 'auth'],
  options: ServicesOptions = {},
): ListeningBehindProxy {
  return forSuite(
    () => startListeningBehindProxy(env, roles, options),
    (behind) => behind.stop(),
  );
}

/** The two lines a process's requests log for one database outage (`Services.storeOutage`). */
export const REQUEST_OUTAGE_LINE =
  'database unreachable: requests failing (not logged again until it answers)';
export const REQUEST_BACK_LINE = 'database answers again: requests served';

/** Warnings and errors only: every access line (`request`, `grpc call`) is info. */
export const noted = (lines: Array<Record<string, unknown>>) =>
  lines.filter((l) => (l.level as number) >= 40);

/**
 * Resolves once the pool holds at most `atMost` connections, so that the next statements must
 * connect through the cut proxy: a pooled connection would first fail with "Connection terminated
 * unexpectedly", which has no code to assert.
 */
export function poolEmptied(store: Store, atMost = 0): Promise<void> {
  return until(() => (store.poolStats()?.total ?? 0) <= atMost, 'the pool emptied');
}

/**
 * The run's engine's own words for a database that is gone, for tests that make an outage without
 * a proxy: PostgreSQL's terminated backend (57P01), SQLite's lock held past its busy timeout
 * (SQLITE_BUSY). The store counts both as unreachable (src/store/errors.ts).
 */
export function engineOutageError(): Error & { code: string } {
  return testDialect() === 'postgres'
    ? Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })
    : Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
}

/**
 * A store plugin that fails every statement with `failing` while it is set, after the statement
 * ran (a write outside a transaction may have been stored): an outage on the run's engine, made by
 * the test, where a real one would make every statement wait out the busy timeout.
 */
export class FailingStatements implements KyselyPlugin {
  failing: Error | undefined;
  transformQuery({ node }: PluginTransformQueryArgs) {
    return node;
  }
  async transformResult({ result }: PluginTransformResultArgs) {
    if (this.failing) throw this.failing;
    return result;
  }
}
