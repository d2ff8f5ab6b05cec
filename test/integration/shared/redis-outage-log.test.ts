import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import {
  failFast,
  SharedStateHealth,
  SharedStateUnavailable,
  untilReadyOrRefused,
} from '../../../src/shared/health.js';
import { RedisCache } from '../../../src/shared/redis-cache.js';
import { connectRedis } from '../../../src/shared/redis-connection.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { until } from '../../helpers/wait.js';

describe('Redis outage logging', () => {
  let redis: Redis | undefined;
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    proxy?.resume();
    redis?.disconnect();
    await proxy?.cut();
    proxy = undefined;
  });

  it('logs one warning for an outage, not one per reconnect attempt', async () => {
    // Nothing listens on port 1: every connection attempt is refused, and ioredis retries.
    redis = new Redis('redis://127.0.0.1:1', {
      lazyConnect: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 20,
    });
    const warnings: string[] = [];
    new SharedStateHealth(redis).useLogger({
      warn: (_obj: object, msg: string) => void warnings.push(msg),
      info: () => undefined,
    });
    let attempts = 0;
    redis.on('error', () => void (attempts += 1));
    const deadline = Date.now() + 10_000;
    while (attempts < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(attempts).toBeGreaterThanOrEqual(5);
    expect(warnings).toEqual(['redis error; reconnecting (not logged again until it is back)']);
  });

  it('a silent Redis: one call waits its 500 ms, the next fail at once, and a late reply ends the outage', async () => {
    const target = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 6379) });
    redis = connectRedis(`redis://127.0.0.1:${proxy.port}`);
    const health = new SharedStateHealth(redis);
    const warnings: string[] = [];
    health.useLogger({ warn: (_obj: object, msg: string) => void warnings.push(msg), info: () => undefined });
    const cache = failFast(health, new RedisCache(redis, uniquePrefix('hang')));
    await untilReadyOrRefused(redis, 5_000);
    let readyEvents = 0;
    redis.on('ready', () => void (readyEvents += 1));
    await cache.get('k');
    expect(health.up).toBe(true);

    proxy.hang();
    const started = performance.now();
    await expect(cache.get('k')).rejects.toThrow(/did not answer within 500 ms/);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(health.up).toBe(false);
    // Known silent: ten calls fail without each waiting (ten timeouts would be 5 s).
    const fast = performance.now();
    for (let i = 0; i < 10; i++) await expect(cache.get('k')).rejects.toBeInstanceOf(SharedStateUnavailable);
    expect(performance.now() - fast).toBeLessThan(5_000);
    health.degraded('test', 'a test gave up', new Error('silent'));

    // Answering again before the client drops the connection (2 s of silence): the reply to the
    // call that timed out ends the outage, without a reconnection.
    proxy.resume();
    const deadline = Date.now() + 5_000;
    while (!health.up && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(health.up).toBe(true);
    expect(readyEvents).toBe(0);
    expect(await cache.get('k')).toBeUndefined();
    expect(warnings).toEqual([
      'Redis does not answer; calls to it fail at once until it does (not logged again until it is back)',
      'Redis unavailable: a test gave up',
      'Redis is back: shared limits and caches restored',
    ]);
  });

  it('an outage no request met: its warning gets a back line once the connection is ready again', async () => {
    const target = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 6379) });
    redis = connectRedis(`redis://127.0.0.1:${proxy.port}`);
    const log = memoryLog('info');
    new SharedStateHealth(redis).useLogger(log.logger);
    await untilReadyOrRefused(redis, 5_000);
    expect(redis.status).toBe('ready');
    const messages = () => log.lines.map((l) => l.msg);

    // Refused: ioredis retries, and fails each time, with no request to meet the outage.
    await proxy.cut();
    await until(() => log.lines.length > 0, 'the outage line');
    let errors = 0;
    redis.on('error', () => void (errors += 1));
    await until(() => errors >= 2, 'two more reconnection attempts refused');
    await proxy.restore();
    await until(() => log.lines.length > 1, 'the back line', 10_000);
    expect(redis.status).toBe('ready');
    // A command answered after the back line adds nothing.
    expect(await redis.ping()).toBe('PONG');
    expect(messages()).toEqual([
      'redis error; reconnecting (not logged again until it is back)',
      'Redis is back: shared limits and caches restored',
    ]);
    expect(log.lines.map((l) => l.level)).toEqual([40, 40]);

    // The next outage is logged again, and closed again.
    await proxy.cut();
    await until(() => log.lines.length > 2, 'the second outage line');
    await proxy.restore();
    await until(() => log.lines.length > 3, 'the second back line', 10_000);
    expect(messages().slice(2)).toEqual([
      'redis error; reconnecting (not logged again until it is back)',
      'Redis is back: shared limits and caches restored',
    ]);
  });
});
