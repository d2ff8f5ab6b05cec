import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cache } from '../../../src/shared/cache.js';
import { MemoryCache } from '../../../src/shared/memory-cache.js';
import { RedisCache } from '../../../src/shared/redis-cache.js';
import { flushPrefix, testRedis, uniquePrefix } from '../../helpers/redis.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let redis: Redis;
const prefix = uniquePrefix('cache');
beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await flushPrefix(redis, prefix);
  redis.disconnect();
});

const subjects: Array<{ name: string; make(): Cache }> = [
  { name: 'memory', make: () => new MemoryCache() },
  { name: 'redis', make: () => new RedisCache(redis, prefix) },
];

describe.each(subjects)('Cache contract: $name', (subject) => {
  let cache: Cache;
  beforeAll(() => {
    cache = subject.make();
  });

  it('misses an unknown key, then returns what was set', async () => {
    expect(await cache.get('user:a')).toBeUndefined();
    await cache.set('user:a', '{"id":"a"}', 60);
    expect(await cache.get('user:a')).toBe('{"id":"a"}');
  });

  it('overwrites and deletes, and deleting a missing key is fine', async () => {
    await cache.set('user:b', 'one', 60);
    await cache.set('user:b', 'two', 60);
    expect(await cache.get('user:b')).toBe('two');
    await cache.delete('user:b');
    expect(await cache.get('user:b')).toBeUndefined();
    await expect(cache.delete('user:never')).resolves.toBeUndefined();
  });

  it('keeps values exactly, including non-ASCII text and large values', async () => {
    const value = JSON.stringify({ name: 'Zoë 数据 🚀', pad: 'x'.repeat(200_000) });
    await cache.set('user:c', value, 60);
    expect(await cache.get('user:c')).toBe(value);
  });

  it('expires entries after their TTL', async () => {
    await cache.set('user:d', 'soon gone', 1);
    expect(await cache.get('user:d')).toBe('soon gone');
    await sleep(1_100);
    expect(await cache.get('user:d')).toBeUndefined();
  });

  it('refuses a TTL that would keep an entry forever or never', async () => {
    for (const ttl of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(cache.set('user:e', 'v', ttl)).rejects.toBeInstanceOf(RangeError);
    }
  });

  it('clears every entry', async () => {
    for (let i = 0; i < 5; i++) await cache.set(`user:clear${i}`, 'v', 60);
    await cache.clear();
    for (let i = 0; i < 5; i++) expect(await cache.get(`user:clear${i}`)).toBeUndefined();
    await cache.set('user:clear0', 'again', 60);
    expect(await cache.get('user:clear0')).toBe('again');
  });
});

describe('RedisCache clear', () => {
  it('deletes the keys under its prefix, across many SCAN steps, and no others', async () => {
    const mine = uniquePrefix('clear-mine');
    // A prefix that starts like the first one (kept), and one whose glob characters must be taken
    // literally (unescaped, `[*]` would match a `*` and miss the key itself).
    const near = `${mine.slice(0, -1)}x:`;
    const globbed = uniquePrefix('clear-[*]');
    try {
      const cache = new RedisCache(redis, mine);
      for (let i = 0; i < 2_500; i += 500) {
        await redis.mset(...Array.from({ length: 500 }, (_, j) => [`${mine}k${i + j}`, 'v']).flat());
      }
      await redis.set(`${near}k`, 'kept');
      await redis.set(`${globbed}k`, 'v');
      await cache.clear();
      expect(await redis.exists(`${mine}k0`, `${mine}k2499`)).toBe(0);
      expect(await redis.get(`${near}k`)).toBe('kept');
      await new RedisCache(redis, globbed).clear();
      expect(await redis.get(`${globbed}k`)).toBeNull();
    } finally {
      await flushPrefix(redis, mine);
      await redis.del(`${near}k`, `${globbed}k`);
    }
  });
});

describe('RedisCache storage', () => {
  it('stores under its prefix with a whole-second expiry', async () => {
    const cache = new RedisCache(redis, prefix);
    await cache.set('user:f', 'v', 30);
    expect(await redis.get(`${prefix}user:f`)).toBe('v');
    const ttl = await redis.ttl(`${prefix}user:f`);
    expect(ttl).toBeGreaterThan(25);
    expect(ttl).toBeLessThanOrEqual(30);
  });

  it('is shared: a delete through one client is seen by another', async () => {
    const other = testRedis();
    try {
      const a = new RedisCache(redis, prefix);
      const b = new RedisCache(other, prefix);
      await a.set('user:g', 'shared', 60);
      expect(await b.get('user:g')).toBe('shared');
      await b.delete('user:g');
      expect(await a.get('user:g')).toBeUndefined();
    } finally {
      other.disconnect();
    }
  });
});

describe('MemoryCache bounds', () => {
  it('evicts the least recently used entry beyond its size', async () => {
    const cache = new MemoryCache(2);
    await cache.set('a', '1', 60);
    await cache.set('b', '2', 60);
    await cache.get('a');
    await cache.set('c', '3', 60);
    expect(await cache.get('b')).toBeUndefined();
    expect(await cache.get('a')).toBe('1');
    expect(await cache.get('c')).toBe('3');
  });
});
