import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** The real Redis the Redis-backed tests run against. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix no other run uses, so a test can clean up after itself without touching others. */
export const uniquePrefix = (label: string): string =>
  `atrium-test:${label}:${process.pid}:${randomBytes(4).toString('hex')}:`;

export function testRedis(): Redis {
  return new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 2, lazyConnect: false });
}

/** Deletes every key under `prefix`, and only those. */
export async function flushPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
