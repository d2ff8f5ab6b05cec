import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../../src/auth/principal.js';
import { type Atrium, createAtrium } from '../../../src/compose.js';
import { userCacheKey } from '../../../src/http/rest/users/cache.js';
import type { Tier } from '../../../src/store/types.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { testDialect } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';

type Caller = Awaited<ReturnType<TestAtrium['caller']>>;
type App = NonNullable<Atrium['http']>;

const me = (app: App, caller: Caller) =>
  app.inject({ method: 'GET', url: `/v1/users/${caller.userId}`, headers: caller.headers });

/** Sends `n` requests one after another and returns the responses. */
async function burst(app: App, caller: Caller, n: number) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await me(app, caller));
  return out;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

function expectRateHeaders(headers: Record<string, unknown>, limit: number) {
  expect(headers['x-ratelimit-limit']).toBe(String(limit));
  expect(headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
  const reset = Number(headers['x-ratelimit-reset']);
  expect(Number.isInteger(reset)).toBe(true);
  expect(reset).toBeGreaterThan(nowSeconds());
  expect(reset).toBeLessThanOrEqual(nowSeconds() + 3601);
}

describe('Rate limits (in memory)', () => {
  let atrium: TestAtrium;
  let app: App;
  beforeAll(async () => {
    atrium = await startTestAtrium();
    app = atrium.http!;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('puts X-RateLimit-Limit, -Remaining and -Reset on every authenticated response', async () => {
    const caller = await atrium.caller({ tier: 'enterprise' });
    const first = await me(app, caller);
    const second = await me(app, caller);
    expect(first.statusCode).toBe(200);
    expectRateHeaders(first.headers, 100_000);
    expect(first.headers['x-ratelimit-remaining']).toBe('99999');
    expect(second.headers['x-ratelimit-remaining']).toBe('99998');
    // The reset is when the oldest counted request (the first) leaves, so it does not move.
    expect(second.headers['x-ratelimit-reset']).toBe(first.headers['x-ratelimit-reset']);
  });

  it('carries them on error responses once the caller is known (400, 403, 404)', async () => {
    const caller = await atrium.caller({ tier: 'starter' });
    const admin = await atrium.caller({ role: 'admin', tier: 'growth' });
    const responses = [
      await app.inject({
        method: 'GET',
        url: '/v1/users/usr_missing000000000000000000',
        headers: admin.headers,
      }),
      await app.inject({
        method: 'PATCH',
        url: `/v1/users/${caller.userId}`,
        headers: caller.headers,
        payload: {},
      }),
      await app.inject({
        method: 'PATCH',
        url: `/v1/users/${caller.userId}`,
        headers: admin.headers,
        payload: { role: 'owner' },
      }),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([404, 403, 400]);
    expectRateHeaders(responses[0]!.headers, 10_000);
    expectRateHeaders(responses[1]!.headers, 1_000);
    expectRateHeaders(responses[2]!.headers, 10_000);
  });

  it.each([
    ['free', 100],
    ['starter', 1_000],
    ['growth', 10_000],
    ['enterprise', 100_000],
    [null, 1_000],
  ] as Array<[Tier | null, number]>)('limits tier %s to %i requests per hour', async (tier, limit) => {
    const caller = await atrium.caller({ tier });
    const res = await me(app, caller);
    expect(res.statusCode).toBe(200);
    expectRateHeaders(res.headers, limit);
    expect(res.headers['x-ratelimit-remaining']).toBe(String(limit - 1));
  });

  it('refuses the 101st request of a free key with 429 and the spec body and headers', async () => {
    const caller = await atrium.caller({ tier: 'free' });
    const allowed = await burst(app, caller, 100);
    expect(allowed.every((r) => r.statusCode === 200)).toBe(true);
    expect(allowed.map((r) => Number(r.headers['x-ratelimit-remaining']))).toEqual(
      Array.from({ length: 100 }, (_, i) => 99 - i),
    );
    const refused = await me(app, caller);
    expect(refused.statusCode).toBe(429);
    const body = refused.json();
    expect(body).toEqual({
      error: 'rate_limit_exceeded',
      message: expect.any(String),
      request_id: refused.headers['x-request-id'],
      details: [],
      limit: 100,
      window_seconds: 3600,
      retry_after: expect.any(Number),
    });
    expect(Number.isInteger(body.retry_after)).toBe(true);
    expect(body.retry_after).toBeGreaterThanOrEqual(3590);
    expect(body.retry_after).toBeLessThanOrEqual(3600);
    expect(refused.headers['retry-after']).toBe(String(body.retry_after));
    expect(refused.headers['x-ratelimit-limit']).toBe('100');
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    expect(refused.headers['x-ratelimit-reset']).toBe(allowed[0]!.headers['x-ratelimit-reset']);
    expect(Number(refused.headers['x-ratelimit-reset']) - nowSeconds()).toBeGreaterThanOrEqual(
      body.retry_after - 1,
    );
    expect(refused.headers['x-content-type-options']).toBe('nosniff');

    // Refused requests are not counted, and the limit follows the key on every route.
    for (const url of [
      `/v1/users/${caller.userId}`,
      '/api/v2/orders',
      `/api/v2/users/${caller.userId}/verify`,
    ]) {
      const again = await app.inject({
        method: url.endsWith('verify') ? 'POST' : 'GET',
        url,
        headers: caller.headers,
      });
      expect(again.statusCode).toBe(429);
      expect(again.json().error).toBe('rate_limit_exceeded');
    }
    const decision = await atrium.services.limiter.peek(`rest:key:${caller.keyId}`, 100, 3600);
    expect(decision).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('counts per API key: another key of the same user, and other users, are unaffected', async () => {
    const caller = await atrium.caller({ tier: 'free' });
    await burst(app, caller, 100);
    expect((await me(app, caller)).statusCode).toBe(429);
    const secondKey = await atrium.services.apiKeys.create({ userId: caller.userId, tier: 'free' });
    const withSecond = await me(app, { ...caller, headers: { 'x-api-key': secondKey.key } });
    expect(withSecond.statusCode).toBe(200);
    expect(withSecond.headers['x-ratelimit-remaining']).toBe('99');
  });

  it('does not count or label requests without a valid caller', async () => {
    const caller = await atrium.caller({ tier: 'free' });
    const anonymous = await app.inject({ method: 'GET', url: `/v1/users/${caller.userId}` });
    const badKey = await app.inject({
      method: 'GET',
      url: `/v1/users/${caller.userId}`,
      headers: { 'x-api-key': 'atr_nope' },
    });
    for (const res of [anonymous, badKey]) {
      expect(res.statusCode).toBe(401);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
    expect((await me(app, caller)).headers['x-ratelimit-remaining']).toBe('99');
  });

  it('limits bearer callers per token subject at the default 1,000', async () => {
    const caller = await atrium.caller();
    const user = await atrium.services.core.users.get(caller.userId);
    const principal: Principal = {
      id: user.id,
      kind: 'user',
      role: user.role,
      scopes: new Set(['users:read']),
      via: 'bearer',
      tier: null,
      apiKeyId: null,
      clientId: null,
      tokenExpiresAt: new Date(Date.now() + 900_000),
      rateLimitKey: `sub:${user.id}`,
    };
    // A bearer check that accepts one fixed token, so only the limit is under test. Last test of
    // this instance, which is stopped right after.
    atrium.services.authenticator.useBearerVerifier({ verify: async () => principal });
    const res = await app.inject({
      method: 'GET',
      url: `/v1/users/${user.id}`,
      headers: { authorization: 'Bearer a.b.c' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('1000');
    expect(res.headers['x-ratelimit-remaining']).toBe('999');
    const peek = await atrium.services.limiter.peek(`rest:sub:${user.id}`, 1000, 3600);
    expect(peek.remaining).toBe(998);
  });
});

describe('Rate limits when Redis cannot be reached', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    // Nothing listens on port 1: every Redis command fails.
    atrium = await startTestAtrium({ REDIS_URL: 'redis://127.0.0.1:1' });
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('serves requests unlimited (and uncached) rather than failing them', async () => {
    const caller = await atrium.caller({ tier: 'free' });
    const res = await me(atrium.http!, caller);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    expect(res.headers['x-cache']).toBe('MISS');
    expect(res.json().id).toBe(caller.userId);
  });
});

describe('Rate limits and the user cache across two instances sharing Redis', () => {
  let a: TestAtrium;
  let b: Atrium;
  let sqliteFile: string | undefined;
  const cleanup: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    const env: Record<string, string> = { REDIS_URL: TEST_REDIS_URL };
    if (testDialect() === 'sqlite') {
      // Two instances need one database: a file both open, since an in-memory one is per connection.
      sqliteFile = join(tmpdir(), `atrium-shared-${process.pid}-${Date.now()}.db`);
      env.DATABASE_URL = `sqlite:${sqliteFile}`;
    }
    a = await startTestAtrium(env);
    b = await createAtrium(a.config, ['api']);
  });
  afterAll(async () => {
    for (const c of cleanup) await c();
    await b.close();
    await a.stop();
    if (sqliteFile)
      for (const f of [sqliteFile, `${sqliteFile}-wal`, `${sqliteFile}-shm`]) rmSync(f, { force: true });
  });

  const forget = (caller: Caller) =>
    cleanup.push(async () => {
      await a.services.limiter.reset(`rest:key:${caller.keyId}`);
      await a.services.cache.delete(userCacheKey(caller.userId));
    });

  it('shares one count: 100 requests split between the instances exhaust a free key on both', async () => {
    const caller = await a.caller({ tier: 'free' });
    forget(caller);
    const remaining: number[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await me(i % 2 === 0 ? a.http! : b.http!, caller);
      expect(res.statusCode).toBe(200);
      remaining.push(Number(res.headers['x-ratelimit-remaining']));
    }
    expect(remaining).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
    for (const app of [a.http!, b.http!]) {
      const refused = await me(app, caller);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({
        error: 'rate_limit_exceeded',
        limit: 100,
        window_seconds: 3600,
      });
      expect(refused.headers['x-ratelimit-remaining']).toBe('0');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
  });

  it('counts exactly under concurrent requests to both instances', async () => {
    const caller = await a.caller({ tier: 'free' });
    forget(caller);
    const all = await Promise.all(
      Array.from({ length: 130 }, (_, i) => me(i % 2 === 0 ? a.http! : b.http!, caller)),
    );
    expect(all.filter((r) => r.statusCode === 200)).toHaveLength(100);
    expect(all.filter((r) => r.statusCode === 429)).toHaveLength(30);
  });

  it('shares the user cache, and a change on one instance clears it for the other', async () => {
    const admin = await a.caller({ role: 'admin' });
    const target = await a.caller();
    forget(admin);
    forget(target);
    const url = `/v1/users/${target.userId}`;
    expect((await a.http!.inject({ method: 'GET', url, headers: admin.headers })).headers['x-cache']).toBe(
      'MISS',
    );
    expect((await b.http!.inject({ method: 'GET', url, headers: admin.headers })).headers['x-cache']).toBe(
      'HIT',
    );
    const patched = await b.http!.inject({
      method: 'PATCH',
      url,
      headers: admin.headers,
      payload: { name: 'Via B' },
    });
    expect(patched.statusCode).toBe(200);
    const after = await a.http!.inject({ method: 'GET', url, headers: admin.headers });
    expect(after.headers['x-cache']).toBe('MISS');
    expect(after.json().name).toBe('Via B');
  });
});
