import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { call } from '../../helpers/rest-client.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';

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
