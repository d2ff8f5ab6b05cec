import type { Redis } from 'ioredis';
import type { Cache } from './cache.js';
import { ttlMs } from './memory-cache.js';

/** A cache every instance shares, so one delete after a change serves them all. */
export class RedisCache implements Cache {
  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix = 'atrium:cache:',
  ) {}

  async get(key: string): Promise<string | undefined> {
    return (await this.redis.get(this.keyPrefix + key)) ?? undefined;
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    // EX takes whole seconds; rounding up never expires an entry earlier than asked.
    await this.redis.set(this.keyPrefix + key, value, 'EX', Math.ceil(ttlMs(ttlSeconds) / 1000));
  }

  async delete(key: string): Promise<void> {
    await this.redis.del(this.keyPrefix + key);
  }
}
