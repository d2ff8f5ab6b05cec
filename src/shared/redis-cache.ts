import type { Redis } from 'ioredis';
import type { Cache } from './cache.js';
import { ttlMs } from './memory-cache.js';

/** Runs one call to Redis (SharedStateHealth.call: fails at once while Redis is down, never waits long). */
export type RedisCall = <T>(call: () => Promise<T>) => Promise<T>;

/** Keys SCAN looks at per step of `clear`: each step is one short call, however large the keyspace. */
const CLEAR_SCAN_COUNT = 1_000;

/** A cache every instance shares, so one delete after a change serves them all. */
export class RedisCache implements Cache {
  /**
   * `call` runs each call to Redis; the factory passes SharedStateHealth.call, so `clear`, which
   * takes one SCAN step per call, is bounded per step rather than as a whole.
   */
  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix = 'atrium:cache:',
    private readonly call: RedisCall = (run) => run(),
  ) {}

  async get(key: string): Promise<string | undefined> {
    return (await this.call(() => this.redis.get(this.keyPrefix + key))) ?? undefined;
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    // EX takes whole seconds; rounding up never expires an entry earlier than asked.
    const seconds = Math.ceil(ttlMs(ttlSeconds) / 1000);
    await this.call(() => this.redis.set(this.keyPrefix + key, value, 'EX', seconds));
  }

  async delete(key: string): Promise<void> {
    await this.call(() => this.redis.del(this.keyPrefix + key));
  }

  async clear(): Promise<void> {
    // The prefix's glob characters are escaped: MATCH reads `*`, `?`, `[` and `\` as patterns.
    const pattern = `${this.keyPrefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
    let cursor = '0';
    do {
      const [next, keys] = await this.call(() =>
        this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', CLEAR_SCAN_COUNT),
      );
      if (keys.length > 0) await this.call(() => this.redis.unlink(...keys));
      cursor = next;
    } while (cursor !== '0');
  }
}
