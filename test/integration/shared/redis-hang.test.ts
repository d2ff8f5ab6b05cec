import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { call } from '../../helpers/rest-client.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { OwnRedis } from '../cluster/support.js';
import { until } from '../../helpers/wait.js';

/**
 * docs/deployment.md, "When Redis or PostgreSQL fails": a Redis that hangs (its connections stay
 * open, nothing answers: a stopped process, a path that swallows packets) degrades as a Redis that
 * refuses connections does. Here the real Redis sits behind a relay that stops forwarding.
 *
 * Timing bounds are loose on purpose (the machine may be slow): they only tell "bounded" from
 * "held until REQUEST_TIMEOUT_MS (30 s)", and "each call fails at once" from "each call waits".
 */
const BOUNDED_MS = 5_000;

describe('REST and readiness while Redis hangs', () => {
  const log = memoryLog('warn');
  let proxy: TcpProxy;
  let atrium: TestAtrium;
  let url: string;
  let key: Record<string, string>;

  beforeAll(async () => {
    const redisUrl = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    redisUrl.host = `127.0.0.1:${proxy.port}`;
    atrium = await startTestAtrium({ REDIS_URL: redisUrl.toString(), HOST: '127.0.0.1', LOG_LEVEL: 'warn' });
    atrium.services.sharedHealth.useLogger(log.logger);
    url = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller({ tier: 'free' })).headers;
  });
  afterAll(async () => {
    proxy?.resume();
    await atrium?.stop();
    await proxy?.cut().catch(() => undefined);
  });

  const orders = () => call(url, 'GET', '/api/v2/orders?limit=1', { headers: key });
  const timed = async <T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> => {
    const started = performance.now();
    const value = await run();
    return { value, ms: performance.now() - started };
  };
  const metric = async (pattern: RegExp): Promise<number | undefined> => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const match = pattern.exec(text);
    return match ? Number(match[1]) : undefined;
  };
  const warnings = () => log.lines.map((l) => String(l.msg));

  it('answers within a bounded time, unlimited, and fails fast after the first timeout', async () => {
    const before = await orders();
    expect(before.status).toBe(200);
    expect(before.headers.get('x-ratelimit-limit')).toBe('100');
    expect(await metric(/^atrium_redis_up (\d+)$/m)).toBe(1);

    proxy.hang();
    const first = await timed(orders);
    expect(first.value.status).toBe(200);
    expect(first.value.headers.get('x-ratelimit-limit')).toBeNull();
    expect(first.value.headers.get('x-ratelimit-remaining')).toBeNull();
    expect(first.ms).toBeLessThan(BOUNDED_MS);

    // Known silent now: ten more requests together take less than ten timeouts (10 x 500 ms).
    const more = await timed(async () => {
      const answers = [];
      for (let i = 0; i < 10; i++) answers.push(await orders());
      return answers;
    });
    for (const answer of more.value) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    }
    expect(more.ms).toBeLessThan(BOUNDED_MS);

    expect(await metric(/^atrium_redis_up (\d+)$/m)).toBe(0);
    expect(
      await metric(/^atrium_shared_state_degraded_total\{component="rate_limiter"\} (\d+)$/m),
    ).toBeGreaterThanOrEqual(11);
  });

  it('reports not ready, and publishes to GraphQL subscribers fail, without hanging', async () => {
    const ready = await timed(() => fetch(`${url}/readyz`));
    expect(ready.value.status).toBe(503);
    expect(((await ready.value.json()) as { checks: Record<string, string> }).checks.redis).toBe(
      'unavailable',
    );
    expect(ready.ms).toBeLessThan(BOUNDED_MS);

    const published = await timed(() =>
      atrium.services.broadcast.publish('redis-hang-test', { hello: 1 }).then(
        () => 'sent',
        () => 'refused',
      ),
    );
    expect(published.value).toBe('refused');
    expect(published.ms).toBeLessThan(BOUNDED_MS);
  });

  it('stays bounded after the silent connection is dropped and reconnection hangs too', async () => {
    // Past the socket timeout (2 s): the client has dropped the silent connection, and its new one
    // is accepted but never answered either.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const later = await timed(async () => {
      const answers = [];
      for (let i = 0; i < 5; i++) answers.push(await orders());
      return answers;
    });
    for (const answer of later.value) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    }
    expect(later.ms).toBeLessThan(BOUNDED_MS);
  });

  it('logs the outage once: one line for the connection, one for the rate limits', () => {
    expect(warnings().filter((m) => /Redis does not answer|redis error/.test(m))).toEqual([
      'Redis does not answer; calls to it fail at once until it does (not logged again until it is back)',
    ]);
    expect(warnings().filter((m) => m.startsWith('Redis unavailable'))).toEqual([
      'Redis unavailable: rate limits fail open (requests are not limited)',
    ]);
  });

  it('limits again once Redis answers, up to 429', async () => {
    proxy.resume();
    const deadline = Date.now() + 15_000;
    let answer = await orders();
    while (answer.headers.get('x-ratelimit-limit') === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      answer = await orders();
    }
    expect(answer.headers.get('x-ratelimit-limit')).toBe('100');
    expect(await metric(/^atrium_redis_up (\d+)$/m)).toBe(1);
    expect(warnings().filter((m) => m.startsWith('Redis is back'))).toHaveLength(1);
    expect((await timed(() => fetch(`${url}/readyz`))).value.status).toBe(200);

    // The free tier's 100 requests an hour apply again: spend what is left, then 429.
    for (let i = 0; i < 110 && answer.status === 200; i++) answer = await orders();
    expect(answer.status).toBe(429);
    expect(answer.headers.get('x-ratelimit-remaining')).toBe('0');
  });
});

/**
 * A process started while Redis already hangs waits for it as for a late Redis (5 s), then serves
 * degraded; GraphQL's subscription to the broadcast (made at start) must not hold the start.
 */
describe('starting while Redis hangs', () => {
  let proxy: TcpProxy;
  let atrium: TestAtrium | undefined;

  beforeAll(async () => {
    const redisUrl = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
  });
  afterAll(async () => {
    proxy?.resume();
    await atrium?.stop();
    await proxy?.cut().catch(() => undefined);
  });

  it('starts within a bounded time and serves unlimited requests, then limits once Redis answers', async () => {
    proxy.hang();
    const started = performance.now();
    atrium = await startTestAtrium({ REDIS_URL: `redis://127.0.0.1:${proxy.port}`, HOST: '127.0.0.1' });
    const url = (await atrium.listen()).httpUrl!;
    // 5 s of waiting for Redis, and a margin for a slow machine; far from "never".
    expect(performance.now() - started).toBeLessThan(15_000);
    const { headers } = await atrium.caller({ tier: 'free' });
    const first = await call(url, 'GET', '/api/v2/orders?limit=1', { headers });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit')).toBeNull();

    proxy.resume();
    const deadline = Date.now() + 15_000;
    let answer = first;
    while (answer.headers.get('x-ratelimit-limit') === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      answer = await call(url, 'GET', '/api/v2/orders?limit=1', { headers });
    }
    expect(answer.headers.get('x-ratelimit-limit')).toBe('100');
  });
});

/**
 * The hang as it happens to a real server: a redis-server of this test's own (never the shared one
 * on 6379) stopped with SIGSTOP, so the kernel still accepts connections and bytes while nothing
 * answers, then continued with SIGCONT.
 */
describe('REST, the user cache, GraphQL and the broadcast while redis-server is stopped (SIGSTOP)', () => {
  const log = memoryLog('warn');
  let server: OwnRedis;
  let atrium: TestAtrium;
  let url: string;
  let caller: { userId: string; headers: Record<string, string> };
  const heard: unknown[] = [];

  beforeAll(async () => {
    server = await OwnRedis.start();
    atrium = await startTestAtrium({
      REDIS_URL: server.url,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    });
    atrium.services.sharedHealth.useLogger(log.logger);
    url = (await atrium.listen()).httpUrl!;
    caller = await atrium.caller({ tier: 'free' });
    await atrium.services.broadcast.subscribe('redis-sigstop-test', (m) => void heard.push(m));
  });
  afterAll(async () => {
    // Continued first, so a test that failed while it was frozen does not hold the shutdown.
    server?.thaw();
    await atrium?.stop();
    await server?.stop();
  });

  const get = (path: string) => call(url, 'GET', path, { headers: caller.headers });
  const graphql = () =>
    call(url, 'POST', '/graphql', { headers: caller.headers, json: { query: '{ __typename }' } });
  const timed = async <T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> => {
    const started = performance.now();
    const value = await run();
    return { value, ms: performance.now() - started };
  };
  const metrics = async () => (await fetch(`${url}/metrics`)).text();

  it('serves every request within a bounded time while it is stopped, and limits again after', async () => {
    const user = `/v1/users/${caller.userId}`;
    expect((await get('/api/v2/orders?limit=1')).headers.get('x-ratelimit-limit')).toBe('100');
    expect((await get(user)).status).toBe(200);
    expect((await get(user)).headers.get('x-cache')).toMatch(/^HIT/);
    await atrium.services.broadcast.publish('redis-sigstop-test', { n: 1 });
    await waitFor(() => heard.length === 1, 'the first message');

    server.freeze();
    const during = await timed(async () => {
      const answers = [];
      for (let i = 0; i < 4; i++) {
        answers.push(await get('/api/v2/orders?limit=1'), await get(user), await graphql());
      }
      return answers;
    });
    for (const answer of during.value) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    }
    // The user is read from the database: no cache answered.
    for (const answer of during.value.filter((a) => a.headers.has('x-cache'))) {
      expect(answer.headers.get('x-cache')).toBe('MISS');
    }
    // Twelve requests (each would have waited 30 s before, and 500 ms each if every call waited).
    expect(during.ms).toBeLessThan(BOUNDED_MS);
    const published = await timed(() =>
      atrium.services.broadcast.publish('redis-sigstop-test', { n: 2 }).then(
        () => 'sent',
        () => 'refused',
      ),
    );
    expect(published.value).toBe('refused');
    expect(published.ms).toBeLessThan(BOUNDED_MS);
    // The core's after-commit signal of a new comment, which the GraphQL comment feed publishes.
    atrium.services.bus.emit({ kind: 'comment.added', commentId: 'c-hang', postId: 'p-hang' });
    await waitFor(
      async () => /component="broadcast"\} [1-9]/.test(await metrics()),
      'the comment event to be given up',
      BOUNDED_MS,
    );
    const text = await metrics();
    expect(text).toMatch(/^atrium_redis_up 0$/m);
    expect(text).toMatch(/^atrium_shared_state_degraded_total\{component="rate_limiter"\} [1-9]/m);
    expect(text).toMatch(/^atrium_shared_state_degraded_total\{component="user_cache"\} [1-9]/m);
    expect(text).toMatch(/^atrium_shared_state_degraded_total\{component="broadcast"\} [1-9]/m);
    expect((await timed(() => fetch(`${url}/readyz`))).value.status).toBe(503);

    server.thaw();
    await waitFor(
      async () => (await get('/api/v2/orders?limit=1')).headers.get('x-ratelimit-limit') === '100',
      'the rate limit to apply again',
    );
    expect(await metrics()).toMatch(/^atrium_redis_up 1$/m);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    // Subscribers hear the broadcast again.
    await waitFor(async () => {
      await atrium.services.broadcast.publish('redis-sigstop-test', { n: 3 });
      return heard.some((m) => (m as { n: number }).n === 3);
    }, 'a message after SIGCONT');

    const lines = log.lines.map((l) => String(l.msg));
    expect(lines.filter((m) => m.startsWith('Redis unavailable')).sort()).toEqual([
      'Redis unavailable: GraphQL complexity budgets fail open (operations are not limited)',
      'Redis unavailable: comment events reach only the GraphQL subscribers of this instance',
      'Redis unavailable: rate limits fail open (requests are not limited)',
      'Redis unavailable: user reads go to the database (not cached)',
    ]);
    expect(lines.filter((m) => /Redis does not answer|redis error/.test(m))).toHaveLength(1);
    expect(lines.filter((m) => m.startsWith('Redis is back'))).toHaveLength(1);
  });
});

async function waitFor(check: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  return until(check, what, ms, 200);
}
