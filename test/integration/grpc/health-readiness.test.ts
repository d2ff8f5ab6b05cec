import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
} from '../../helpers/database-outage.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { forSuite } from '../../helpers/suite.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { DEFAULT_HEALTH_PROBE_MS } from '../../../src/grpc/server.js';
import {
  grpc,
  healthClient,
  startGrpcAtrium,
  unary,
  waitFor,
  watchHealth,
  type Client,
  type GrpcAtrium,
} from './support.js';

const SERVICES = ['', 'users.v1.UserService'];
/** Long enough for a probe to notice a change (its interval plus the checks' 2 s timeout), with slack. */
const NOTICE_MS = DEFAULT_HEALTH_PROBE_MS + 2_000 + 8_000;

async function statuses(health: Client): Promise<string[]> {
  const answers = await Promise.all(
    SERVICES.map((service) => unary<{ status: string }>(health, 'Check', { service })),
  );
  return answers.map((a) => (a.error ? `error ${a.error.code}` : a.value!.status));
}

/** Polls Check (as a balancer or Kubernetes would) until every service reports `status`. */
async function untilChecked(health: Client, status: string, what: string): Promise<void> {
  const deadline = Date.now() + NOTICE_MS;
  let last: string[] = [];
  while (Date.now() < deadline) {
    last = await statuses(health);
    if (last.every((s) => s === status)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`health did not turn ${status} ${what}: ${last.join(', ')}`);
}

const readyz = async (httpUrl: string) => (await fetch(`${httpUrl}/readyz`)).status;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const skip = await postgresMissing();

interface HealthBehindProxy extends ListeningBehindProxy {
  /** A grpc.health.v1.Health client on the server's gRPC port, closed before the server stops. */
  health: Client;
}

/**
 * An Atrium with the api, auth and grpc roles behind the database proxy, listening, and a Health
 * client on it, for the enclosing describe block (see forSuite).
 */
function healthBehindProxyForSuite(env: Record<string, string> = {}): HealthBehindProxy {
  return forSuite(
    async () => {
      const server = await startListeningBehindProxy(env, ['api', 'auth', 'grpc']);
      return { ...server, health: healthClient(server.grpcAddress!) };
    },
    async (server) => {
      server.health.close();
      await server.stop();
    },
  );
}

/**
 * gRPC health follows /readyz's rule: a balancer or a Kubernetes gRPC probe stops sending calls that
 * would fail (INTERNAL, retry-after) while the database is away, and sends them again when it is back.
 */
describe.skipIf(skip !== undefined)('gRPC health when PostgreSQL goes away and comes back', () => {
  const server = healthBehindProxyForSuite();

  it('turns NOT_SERVING while the database is cut and SERVING after; Watch hears both changes', async () => {
    expect(await statuses(server.health)).toEqual(['SERVING', 'SERVING']);
    const watched = SERVICES.map((service) => watchHealth(server.health, service));
    await waitFor(() => watched.every((w) => w.statuses.length > 0), 5_000, 'the first statuses');

    await server.cutDatabase();
    await untilChecked(server.health, 'NOT_SERVING', 'with the database cut');
    expect(await readyz(server.httpUrl)).toBe(503);
    await waitFor(() => watched.every((w) => w.statuses.length >= 2), 5_000, 'Watch to hear NOT_SERVING');

    await server.restoreDatabase();
    await untilChecked(server.health, 'SERVING', 'after the database came back');
    expect(await readyz(server.httpUrl)).toBe(200);
    await waitFor(() => watched.every((w) => w.statuses.length >= 3), 5_000, 'Watch to hear SERVING');

    // One message per change: a probe that finds the same status again sends nothing.
    await sleep(DEFAULT_HEALTH_PROBE_MS * 2);
    for (const w of watched) {
      expect(w.statuses).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
      expect(w.end).toBeUndefined();
    }
  });

  it("keeps the gRPC server's own drain NOT_SERVING through a recovery", async () => {
    const watched = watchHealth(server.health, '');
    await waitFor(() => watched.statuses.length > 0, 5_000, 'the first status');
    await server.cutDatabase();
    await untilChecked(server.health, 'NOT_SERVING', 'with the database cut');

    // The drain's first step alone, as GrpcServer offers it: the process is not marked draining, so
    // only health's own rule (a drain is final) can keep it NOT_SERVING once the database is back.
    server.atrium.grpc!.announceDrain();
    await server.restoreDatabase();
    const deadline = Date.now() + NOTICE_MS;
    while ((await readyz(server.httpUrl)) !== 200 && Date.now() < deadline) await sleep(100);
    expect(await readyz(server.httpUrl)).toBe(200);
    await sleep(DEFAULT_HEALTH_PROBE_MS * 2 + 500);
    expect(await statuses(server.health)).toEqual(['NOT_SERVING', 'NOT_SERVING']);
    expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING']);
  });
});

describe.skipIf(skip !== undefined)('gRPC health when a drain begins during an outage', () => {
  // The drain keeps serving (health NOT_SERVING) this long before it closes anything, so the test
  // can ask health during it; long enough for several probes after the database returns.
  const server = healthBehindProxyForSuite({ SHUTDOWN_DELAY_MS: String(DEFAULT_HEALTH_PROBE_MS * 4) });

  it('stays NOT_SERVING when the database comes back during the drain', { timeout: 60_000 }, async () => {
    const watched = watchHealth(server.health, '');
    await waitFor(() => watched.statuses.length > 0, 5_000, 'the first status');
    await server.cutDatabase();
    await untilChecked(server.health, 'NOT_SERVING', 'with the database cut');

    const closing = server.atrium.close();
    await server.restoreDatabase();
    // The database answers again (the checks /readyz runs pass; only the drain keeps it not ready)...
    const deadline = Date.now() + NOTICE_MS;
    let body: { checks?: Record<string, string> } = {};
    while (Date.now() < deadline) {
      const res = await fetch(`${server.httpUrl}/readyz`);
      body = (await res.json()) as typeof body;
      expect(res.status).toBe(503);
      if (body.checks?.database === 'ok') break;
      await sleep(100);
    }
    expect(body.checks).toEqual({ database: 'ok', process: 'draining' });
    // ...and several probes later health still says NOT_SERVING: the drain's status is final.
    await sleep(DEFAULT_HEALTH_PROBE_MS * 2 + 500);
    expect(await statuses(server.health)).toEqual(['NOT_SERVING', 'NOT_SERVING']);
    expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING']);

    // Let the drain go on: it waits for open connections to close.
    server.health.close();
    await closing;
    await waitFor(() => watched.end !== undefined, 5_000, 'the Watch to end');
    expect(watched.end?.code).toBe(grpc.status.OK);
    expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING']);
  });
});

/** /readyz checks Redis when REDIS_URL is set (for the grpc role too), so gRPC health does as well. */
describe('gRPC health when Redis goes away and comes back', () => {
  let proxy: TcpProxy;
  let atrium: GrpcAtrium;
  let health: Client;

  beforeAll(async () => {
    const redisUrl = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    redisUrl.host = `127.0.0.1:${proxy.port}`;
    atrium = await startGrpcAtrium({ REDIS_URL: redisUrl.toString() });
    health = atrium.health();
  });
  afterAll(async () => {
    await atrium?.stop();
    await proxy?.cut().catch(() => undefined);
  });

  it('turns NOT_SERVING while Redis is cut and SERVING after; Watch hears both changes', async () => {
    expect(await statuses(health)).toEqual(['SERVING', 'SERVING']);
    const watched = watchHealth(health, 'users.v1.UserService');
    await waitFor(() => watched.statuses.length > 0, 5_000, 'the first status');

    await proxy.cut();
    await untilChecked(health, 'NOT_SERVING', 'with Redis cut');
    expect(await readyz(atrium.httpUrl)).toBe(503);

    await proxy.restore();
    // ioredis reconnects on its own schedule (up to 2 s between attempts), then the next probe sees it.
    await untilChecked(health, 'SERVING', 'after Redis came back');
    expect(await readyz(atrium.httpUrl)).toBe(200);
    await waitFor(() => watched.statuses.length >= 3, 5_000, 'Watch to hear SERVING');
    expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
  });
});

/** SQLite is a file this process holds open: nothing to lose, so health stays SERVING. */
describe('gRPC health on SQLite', () => {
  let dir: string;
  let atrium: GrpcAtrium;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-grpc-health-'));
    atrium = await startGrpcAtrium({ DATABASE_URL: `sqlite:${join(dir, 'atrium.db')}` });
  });
  afterAll(async () => {
    await atrium?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stays SERVING across probes, with nothing more sent on Watch', async () => {
    const health = atrium.health();
    const watched = watchHealth(health, '');
    await waitFor(() => watched.statuses.length > 0, 5_000, 'the first status');
    await sleep(DEFAULT_HEALTH_PROBE_MS * 2 + 500);
    expect(await statuses(health)).toEqual(['SERVING', 'SERVING']);
    expect(await readyz(atrium.httpUrl)).toBe(200);
    expect(watched.statuses).toEqual(['SERVING']);
  });
});
