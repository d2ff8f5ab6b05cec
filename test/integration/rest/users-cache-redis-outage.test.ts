import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Atrium, createAtrium } from '../../../src/compose.js';
import { runCli } from '../../helpers/cli.js';
import { testDialect } from '../../helpers/database.js';
import { flushPrefix, TEST_REDIS_URL, testRedis } from '../../helpers/redis.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { until } from '../../helpers/wait.js';
import { startGrpcAtrium, unary, type GrpcAtrium, type UserMessage } from '../grpc/support.js';

/**
 * decisions §3: a user changed through any surface is changed for REST at once, and every cached
 * copy of it is invalidated. The REST user cache lives in Redis, shared by the instances; a change
 * made while Redis cannot be reached cannot delete the entry there. Once Redis is back, no instance
 * may answer `X-Cache: HIT` with the user as it was before the change (the outside tester's repro:
 * it did so on every instance until the 60 s entry expired).
 *
 * Two instances on one database, each reaching the shared Redis through its own relay (TcpProxy),
 * so a test can take Redis away from both, or give it back to one first. A Redis database index of
 * its own: the fix drops every cached user after an outage, which must not empty the cache other
 * test files running at the same time rely on.
 */
const REDIS_DB = 11;
const CACHE_PREFIX = 'atrium:cache:';

describe('the REST user cache across a Redis outage (two instances sharing Redis)', () => {
  let proxyA: TcpProxy;
  let proxyB: TcpProxy;
  let a: GrpcAtrium;
  let b: Atrium | undefined;
  let dir: string | undefined;
  let redis: Redis;
  let urlA: string;
  let databaseUrl: string;

  const relayed = (proxy: TcpProxy) => {
    const url = new URL(TEST_REDIS_URL);
    url.host = `127.0.0.1:${proxy.port}`;
    url.pathname = `/${REDIS_DB}`;
    return url.toString();
  };

  beforeAll(async () => {
    const target = new URL(TEST_REDIS_URL);
    const upstream = { host: target.hostname, port: Number(target.port || 6379) };
    proxyA = await TcpProxy.start(upstream);
    proxyB = await TcpProxy.start(upstream);
    redis = testRedis();
    await redis.select(REDIS_DB);
    await flushPrefix(redis, CACHE_PREFIX);
    urlA = relayed(proxyA);
    const env: Record<string, string> = { REDIS_URL: urlA };
    if (testDialect() === 'sqlite') {
      // The second instance shares the store: an SQLite file, not one in memory each.
      dir = mkdtempSync(join(tmpdir(), 'atrium-cache-outage-'));
      env.DATABASE_URL = `sqlite:${join(dir, 'atrium.db')}`;
    }
    a = await startGrpcAtrium(env);
    databaseUrl = a.config.databaseUrl;
    b = await createAtrium({ ...a.config, port: 0, redisUrl: relayed(proxyB) }, ['api', 'auth']);
    // Every request goes over a real socket to the instance's own listener, as a client's would.
    bases.set(a, a.httpUrl);
    bases.set(b, (await b.listen()).httpUrl!);
  });
  afterAll(async () => {
    await proxyA?.restore().catch(() => undefined);
    await proxyB?.restore().catch(() => undefined);
    await b?.close();
    await a?.stop();
    await proxyA?.cut().catch(() => undefined);
    await proxyB?.cut().catch(() => undefined);
    if (redis) {
      await flushPrefix(redis, CACHE_PREFIX).catch(() => undefined);
      redis.disconnect();
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const bases = new Map<Atrium, string>();
  const send = (on: Atrium, path: string, init: RequestInit = {}) => fetch(`${bases.get(on)!}${path}`, init);
  const get = async (on: Atrium, userId: string, headers: Record<string, string>) => {
    const res = await send(on, `/v1/users/${userId}`, { headers });
    const body = res.status === 200 ? ((await res.json()) as { name: string }).name : undefined;
    return { status: res.status, cache: res.headers.get('x-cache') ?? undefined, name: body };
  };
  const patchName = async (on: Atrium, userId: string, headers: Record<string, string>, name: string) => {
    const res = await send(on, `/v1/users/${userId}`, {
      method: 'PATCH',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  type Caller = { userId: string; headers: Record<string, string> };
  /** The change, through each surface the tester used, made on instance A. */
  const SURFACES: Array<{
    surface: string;
    change(admin: Caller, target: Caller, name: string): Promise<void>;
  }> = [
    {
      surface: 'REST PATCH',
      change: (admin, target, name) => patchName(a, target.userId, admin.headers, name),
    },
    {
      surface: 'gRPC UpdateUser',
      change: async (_admin, target, name) => {
        const { error } = await unary<UserMessage>(
          a.client(),
          'UpdateUser',
          { user_id: target.userId, name, update_mask: { paths: ['name'] } },
          target.headers,
        );
        expect(error).toBeNull();
      },
    },
    {
      surface: 'GraphQL updateUser',
      change: async (admin, target, name) => {
        const res = await send(a, '/graphql', {
          method: 'POST',
          headers: { ...admin.headers, 'content-type': 'application/json' },
          body: JSON.stringify({
            query: 'mutation($id: ID!, $in: UpdateUserInput!) { updateUser(id: $id, input: $in) { id } }',
            variables: { id: target.userId, in: { name } },
          }),
        });
        const text = await res.text();
        expect(res.status, text).toBe(200);
        expect((JSON.parse(text) as { errors?: unknown }).errors, text).toBeUndefined();
      },
    },
  ];
  const up = (on: Atrium) => on.services.sharedHealth.up;
  const outage = async () => {
    await Promise.all([proxyA.cut(), proxyB.cut()]);
    await until(() => !up(a) && !up(b!), 'both instances see Redis gone');
  };
  const back = async (proxy: TcpProxy, on: Atrium) => {
    await proxy.restore();
    await until(() => up(on), 'the instance sees Redis back', 10_000);
  };

  // Each test starts with Redis reachable from both, whatever the one before left.
  beforeEach(async () => {
    await Promise.all([back(proxyA, a), back(proxyB, b!)]);
  });

  /** A user both instances have served once, so Redis holds its entry: a HIT on each. */
  const warmUser = async () => {
    const admin = await a.caller({ role: 'admin' });
    const target = await a.caller();
    expect((await get(a, target.userId, admin.headers)).cache).toBe('MISS');
    const warm = await get(a, target.userId, admin.headers);
    expect(warm).toMatchObject({ status: 200, cache: 'HIT' });
    expect(await get(b!, target.userId, admin.headers)).toMatchObject({ cache: 'HIT', name: warm.name });
    return { admin, target, oldName: warm.name! };
  };

  it.each(SURFACES)(
    'the tester’s repro ($surface): a change during the outage is not answered from the old entry once Redis is back',
    async ({ change }) => {
      const { admin, target, oldName } = await warmUser();

      await outage();
      await change(admin, target, 'Renamed During Outage');
      // The cache is bypassed while Redis is down.
      expect(await get(a, target.userId, admin.headers)).toMatchObject({
        cache: 'MISS',
        name: 'Renamed During Outage',
      });

      await Promise.all([back(proxyA, a), back(proxyB, b!)]);
      for (const on of [a, b!]) {
        const read = await get(on, target.userId, admin.headers);
        expect(read.name, `was "${oldName}" (X-Cache: ${String(read.cache)})`).toBe('Renamed During Outage');
      }
      // And the cache works again: the entry written after the change is served.
      expect(await get(b!, target.userId, admin.headers)).toMatchObject({
        cache: 'HIT',
        name: 'Renamed During Outage',
      });
    },
  );

  it('an instance that gets Redis back before the writer does never serves the old entry', async () => {
    const { admin, target } = await warmUser();

    await outage();
    await patchName(a, target.userId, admin.headers, 'Renamed Before B Returned');
    // Only B reaches Redis again; the writer, A, still cannot replay its invalidation.
    await back(proxyB, b!);
    expect(up(a)).toBe(false);
    expect((await get(b!, target.userId, admin.headers)).name).toBe('Renamed Before B Returned');
    await back(proxyA, a);
    expect((await get(a, target.userId, admin.headers)).name).toBe('Renamed Before B Returned');
  });

  it('an admin command that ran during the outage: its change is not answered from the old entry', async () => {
    const { admin, target } = await warmUser();

    await outage();
    // A separate short-lived process whose Redis is just as unreachable: it exits before Redis is back.
    const deleted = await runCli(['users', 'delete', target.userId], {
      DATABASE_URL: databaseUrl,
      REDIS_URL: urlA,
    });
    expect(deleted.code, deleted.stderr).toBe(0);

    await Promise.all([back(proxyA, a), back(proxyB, b!)]);
    for (const on of [a, b!]) expect((await get(on, target.userId, admin.headers)).status).toBe(404);
  }, 60_000);
});
