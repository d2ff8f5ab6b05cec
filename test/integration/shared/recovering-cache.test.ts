import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  SharedStateHealth,
  SharedStateUnavailable,
  untilReadyOrRefused,
} from '../../../src/shared/health.js';
import { RecoveringCache } from '../../../src/shared/recovering-cache.js';
import { RedisCache } from '../../../src/shared/redis-cache.js';
import { connectRedis } from '../../../src/shared/redis-connection.js';
import { flushPrefix, TEST_REDIS_URL, testRedis, uniquePrefix } from '../../helpers/redis.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { until } from '../../helpers/wait.js';

/**
 * src/shared/recovering-cache.ts against a real Redis behind a relay: a delete that cannot reach
 * Redis is carried out when it answers again, before the cache is read; too many to remember, and
 * an outage of a process that had Redis, drop the whole cache (its prefix, nothing else).
 */
describe('RecoveringCache', () => {
  const direct: Redis = testRedis();
  let proxy: TcpProxy | undefined;
  let redis: Redis | undefined;
  let prefix = '';
  afterEach(async () => {
    redis?.disconnect();
    await proxy?.cut().catch(() => undefined);
    await flushPrefix(direct, prefix);
    proxy = undefined;
    redis = undefined;
  });
  afterAll(() => direct.disconnect());

  async function relayed(options: { cut?: boolean; maxPending?: number } = {}) {
    const target = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 6379) });
    if (options.cut) await proxy.cut();
    prefix = uniquePrefix('recovering');
    redis = connectRedis(`redis://127.0.0.1:${proxy.port}`);
    const health = new SharedStateHealth(redis);
    const cache = new RecoveringCache(
      new RedisCache(redis, prefix, (call) => health.call(call)),
      health,
      options.maxPending,
    );
    if (!options.cut) await untilReadyOrRefused(redis, 5_000);
    return { cache, health, proxy };
  }
  const stored = (key: string) => direct.get(prefix + key);

  it('a process that never had Redis: its failed deletes are done when Redis comes, nothing else is dropped', async () => {
    const { cache, health, proxy } = await relayed({ cut: true });
    await direct.set(`${prefix}changed`, 'old', 'EX', 60);
    await direct.set(`${prefix}other`, 'kept', 'EX', 60);
    await expect(cache.delete('changed')).rejects.toBeInstanceOf(SharedStateUnavailable);
    expect(cache.owed).toBe(1);
    // Reads fail while it is owed and Redis is away (the caller reads the database).
    await expect(cache.get('changed')).rejects.toBeInstanceOf(SharedStateUnavailable);

    await proxy.restore();
    // Carried out on its own when Redis answers, without waiting for a read of this process.
    await until(async () => health.up && (await stored('changed')) === null, 'the delete replayed', 10_000);
    expect(cache.owed).toBe(0);
    expect(await stored('other')).toBe('kept');
    expect(await cache.get('other')).toBe('kept');
  });

  it('a read right after Redis returns waits for the replay and does not see the old entry', async () => {
    const { cache, health, proxy } = await relayed();
    await cache.set('changed', 'old', 60);
    await proxy.cut();
    await until(() => !health.up, 'Redis seen gone');
    await expect(cache.delete('changed')).rejects.toBeInstanceOf(SharedStateUnavailable);
    await proxy.restore();
    await until(() => health.up, 'Redis seen back', 10_000);
    expect(await cache.get('changed')).toBeUndefined();
  });

  it('after an outage of a process that had Redis, every entry of its prefix is dropped', async () => {
    const { cache, health, proxy } = await relayed();
    // Written by another instance before the outage; whatever changed meanwhile is not known here.
    await direct.set(`${prefix}elsewhere`, 'old', 'EX', 60);
    const outside = `${prefix.slice(0, -1)}-outside:k`;
    await direct.set(outside, 'kept', 'EX', 60);
    try {
      await proxy.cut();
      await until(() => !health.up, 'Redis seen gone');
      await proxy.restore();
      await until(() => health.up, 'Redis seen back', 10_000);
      expect(await cache.get('elsewhere')).toBeUndefined();
      expect(await direct.get(outside)).toBe('kept');
      await cache.set('elsewhere', 'new', 60);
      expect(await cache.get('elsewhere')).toBe('new');
    } finally {
      await direct.del(outside);
    }
  });

  it('more failed deletes than it remembers: the whole cache is dropped instead', async () => {
    const { cache, proxy } = await relayed({ cut: true, maxPending: 2 });
    for (const key of ['a', 'b', 'c', 'untouched']) await direct.set(prefix + key, 'old', 'EX', 60);
    for (const key of ['a', 'b', 'c']) await expect(cache.delete(key)).rejects.toThrow();
    expect(cache.owed).toBe(Infinity);
    await proxy.restore();
    expect(await cache.flush(10_000)).toBe(0);
    for (const key of ['a', 'b', 'c', 'untouched']) expect(await stored(key)).toBeNull();
  });

  it('flush: gives up after its wait while Redis stays away, and says what is owed', async () => {
    const { cache } = await relayed({ cut: true });
    await expect(cache.delete('x')).rejects.toThrow();
    const started = Date.now();
    expect(await cache.flush(300)).toBe(1);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
