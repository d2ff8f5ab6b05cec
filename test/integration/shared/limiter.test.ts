import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySlidingWindowLimiter } from '../../../src/shared/memory-limiter.js';
import type { SlidingWindowLimiter } from '../../../src/shared/rate-limiter.js';
import { RedisSlidingWindowLimiter } from '../../../src/shared/redis-limiter.js';
import { flushPrefix, testRedis, uniquePrefix } from '../../helpers/redis.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const freshKey = () => `contract:${++n}`;

interface Subject {
  name: string;
  make(): SlidingWindowLimiter;
}

let redis: Redis;
let redisTwin: Redis;
const prefix = uniquePrefix('limiter');

beforeAll(() => {
  redis = testRedis();
  redisTwin = testRedis();
});
afterAll(async () => {
  await flushPrefix(redis, prefix);
  redis.disconnect();
  redisTwin.disconnect();
});

const subjects: Subject[] = [
  { name: 'memory', make: () => new MemorySlidingWindowLimiter() },
  {
    name: 'redis',
    make: () => new RedisSlidingWindowLimiter(redis, prefix),
  },
];

describe.each(subjects)('SlidingWindowLimiter contract: $name', (subject) => {
  let limiter: SlidingWindowLimiter;
  beforeAll(() => {
    limiter = subject.make();
  });

  it('counts a weighted hit as its cost, and refuses a cost that does not fit whole', async () => {
    const key = freshKey();
    expect(await limiter.hit(key, 10, 60, 4)).toMatchObject({ allowed: true, remaining: 6 });
    expect(await limiter.hit(key, 10, 60, 5)).toMatchObject({ allowed: true, remaining: 1 });
    // 2 points do not fit in the 1 left: refused, and nothing is counted.
    expect(await limiter.hit(key, 10, 60, 2)).toMatchObject({ allowed: false, remaining: 0 });
    expect(await limiter.hit(key, 10, 60, 1)).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.hit(key, 10, 60, 1)).toMatchObject({ allowed: false });
  });

  it('refuses a cost that is not a positive whole number', async () => {
    await expect(limiter.hit(freshKey(), 10, 60, 0)).rejects.toThrow(RangeError);
    await expect(limiter.hit(freshKey(), 10, 60, 1.5)).rejects.toThrow(RangeError);
  });

  it('allows up to the limit, then refuses with remaining 0', async () => {
    const key = freshKey();
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await limiter.hit(key, 3, 60);
      expect(d).toMatchObject({ allowed: true, limit: 3 });
      remaining.push(d.remaining);
    }
    expect(remaining).toEqual([2, 1, 0]);
    const refused = await limiter.hit(key, 3, 60);
    expect(refused).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
  });

  it('reports the reset as the moment the oldest counted request leaves, in whole seconds', async () => {
    const key = freshKey();
    const before = Date.now();
    const first = await limiter.hit(key, 2, 60);
    await limiter.hit(key, 2, 60);
    const refused = await limiter.hit(key, 2, 60);
    const after = Date.now();
    expect(Number.isInteger(first.resetAt)).toBe(true);
    // The Redis clock and ours may differ by a little; a second of slack covers it.
    expect(first.resetAt).toBeGreaterThanOrEqual(Math.floor((before + 60_000) / 1000) - 1);
    expect(first.resetAt).toBeLessThanOrEqual(Math.ceil((after + 60_000) / 1000) + 1);
    expect(refused.resetAt).toBe(first.resetAt);
    expect(Number.isInteger(refused.retryAfter)).toBe(true);
    expect(refused.retryAfter).toBeGreaterThanOrEqual(59);
    expect(refused.retryAfter).toBeLessThanOrEqual(60);
  });

  it('gives a retry-after of at least 1 second even when the oldest request is about to leave', async () => {
    const key = freshKey();
    await limiter.hit(key, 1, 0.3);
    const refused = await limiter.hit(key, 1, 0.3);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfter).toBe(1);
  });

  it('slides: a request leaves exactly one window after it was made, and refusals are not counted', async () => {
    const key = freshKey();
    const windowSeconds = 1.2;
    expect((await limiter.hit(key, 2, windowSeconds)).allowed).toBe(true); // t = 0
    await sleep(600);
    expect((await limiter.hit(key, 2, windowSeconds)).allowed).toBe(true); // t = 0.6
    for (let i = 0; i < 5; i++) expect((await limiter.hit(key, 2, windowSeconds)).allowed).toBe(false);
    await sleep(750);
    // t = 1.35: the first request has left, the second has not; refusals at 0.6 would block if counted.
    const next = await limiter.hit(key, 2, windowSeconds);
    expect(next).toMatchObject({ allowed: true, remaining: 0 });
    expect((await limiter.hit(key, 2, windowSeconds)).allowed).toBe(false);
  });

  it('peek tells what a hit would get without counting', async () => {
    const key = freshKey();
    for (let i = 0; i < 10; i++)
      expect(await limiter.peek(key, 2, 60)).toMatchObject({ allowed: true, remaining: 1 });
    expect((await limiter.hit(key, 2, 60)).remaining).toBe(1);
    expect(await limiter.peek(key, 2, 60)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await limiter.hit(key, 2, 60)).allowed).toBe(true);
    expect(await limiter.peek(key, 2, 60)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('reset forgets a key and leaves other keys alone', async () => {
    const a = freshKey();
    const b = freshKey();
    await limiter.hit(a, 1, 60);
    await limiter.hit(b, 1, 60);
    await limiter.reset(a);
    expect((await limiter.hit(a, 1, 60)).allowed).toBe(true);
    expect((await limiter.hit(b, 1, 60)).allowed).toBe(false);
  });

  it('counts exactly under concurrency: 50 simultaneous hits against a limit of 20 allow 20', async () => {
    const key = freshKey();
    const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.hit(key, 20, 60)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
    expect(
      decisions
        .filter((d) => d.allowed)
        .map((d) => d.remaining)
        .sort((x, y) => x - y),
    ).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('handles a huge limit', async () => {
    const key = freshKey();
    const d = await limiter.hit(key, Number.MAX_SAFE_INTEGER, 3600);
    expect(d).toMatchObject({ allowed: true, remaining: Number.MAX_SAFE_INTEGER - 1 });
  });

  it('refuses everything with a limit of 0', async () => {
    const d = await limiter.hit(freshKey(), 0, 60);
    expect(d).toMatchObject({ allowed: false, remaining: 0 });
    expect(d.retryAfter).toBeGreaterThanOrEqual(1);
  });

  it('rejects arguments that would disable the limit', async () => {
    for (const [limit, win] of [
      [-1, 60],
      [1.5, 60],
      [Number.NaN, 60],
      [Number.POSITIVE_INFINITY, 60],
      [10, 0],
      [10, -5],
      [10, Number.NaN],
      [10, 10 * 86_400],
    ] as const) {
      await expect(limiter.hit(freshKey(), limit, win)).rejects.toBeInstanceOf(RangeError);
    }
  });
});

describe('RedisSlidingWindowLimiter storage', () => {
  it('keeps one sorted-set member per counted request, under its prefix, expiring with the window', async () => {
    const limiter = new RedisSlidingWindowLimiter(redis, prefix);
    const key = freshKey();
    await Promise.all(Array.from({ length: 10 }, () => limiter.hit(key, 5, 30)));
    expect(await redis.zcard(`${prefix}${key}`)).toBe(5);
    const ttl = await redis.pttl(`${prefix}${key}`);
    expect(ttl).toBeGreaterThan(25_000);
    expect(ttl).toBeLessThanOrEqual(30_000);
  });

  it('shares counts between instances on separate connections', async () => {
    const key = freshKey();
    const one = new RedisSlidingWindowLimiter(redis, prefix);
    const two = new RedisSlidingWindowLimiter(redisTwin, prefix);
    expect((await one.hit(key, 3, 60)).remaining).toBe(2);
    expect((await two.hit(key, 3, 60)).remaining).toBe(1);
    expect((await one.hit(key, 3, 60)).remaining).toBe(0);
    expect((await two.hit(key, 3, 60)).allowed).toBe(false);
  });

  it('sends the script body when the server does not know the script (NOSCRIPT)', async () => {
    // A view of the client whose EVALSHA fails as after SCRIPT FLUSH, without flushing the shared server.
    let evalshaCalls = 0;
    const forgetful = Object.create(redis) as Redis;
    forgetful.evalsha = (async () => {
      evalshaCalls++;
      throw new Error('NOSCRIPT No matching script. Please use EVAL.');
    }) as unknown as Redis['evalsha'];
    const limiter = new RedisSlidingWindowLimiter(forgetful, prefix);
    expect((await limiter.hit(freshKey(), 1, 60)).allowed).toBe(true);
    expect(evalshaCalls).toBe(1);
  });

  it('passes other Redis errors through', async () => {
    const broken = Object.create(redis) as Redis;
    broken.evalsha = (async () => {
      throw new Error('ERR something else');
    }) as unknown as Redis['evalsha'];
    await expect(new RedisSlidingWindowLimiter(broken, prefix).hit(freshKey(), 1, 60)).rejects.toThrow(
      'ERR something else',
    );
  });
});

describe('MemorySlidingWindowLimiter clock', () => {
  it('follows the injected clock and stays exact when the clock steps back', async () => {
    let now = 1_000_000;
    const limiter = new MemorySlidingWindowLimiter(() => now);
    expect((await limiter.hit('k', 2, 10)).resetAt).toBe(1010);
    now += 4_000;
    await limiter.hit('k', 2, 10);
    now -= 3_000; // a wall-clock step back must not free a slot early
    expect((await limiter.hit('k', 2, 10)).allowed).toBe(false);
    now = 1_000_000 + 10_000; // exactly one window after the first request: it has left
    const d = await limiter.hit('k', 2, 10);
    expect(d).toMatchObject({ allowed: true, remaining: 0, resetAt: 1014 });
  });
});
