import type { Redis } from 'ioredis';
import type { Cache } from './cache.js';
import { MemoryCache } from './memory-cache.js';
import { MemorySlidingWindowLimiter } from './memory-limiter.js';
import type { SlidingWindowLimiter } from './rate-limiter.js';
import { RedisCache } from './redis-cache.js';
import { RedisSlidingWindowLimiter } from './redis-limiter.js';
import { failFast, SharedStateHealth } from './health.js';

export interface SharedState {
  limiter: SlidingWindowLimiter;
  cache: Cache;
  /** Whether Redis answers, and what went ahead without it (metrics, one log line per outage). */
  sharedHealth: SharedStateHealth;
}

/**
 * With Redis, limits and caches are shared by every instance; without it they live in this
 * process, which is right for the single-process default and for tests.
 */
export function createSharedState(redis: Redis | undefined, keyPrefix = 'atrium:'): SharedState {
  if (redis) {
    return {
      limiter: failFast(redis, new RedisSlidingWindowLimiter(redis, `${keyPrefix}rl:`)),
      cache: failFast(redis, new RedisCache(redis, `${keyPrefix}cache:`)),
      sharedHealth: new SharedStateHealth(redis),
    };
  }
  return {
    limiter: new MemorySlidingWindowLimiter(),
    cache: new MemoryCache(),
    sharedHealth: new SharedStateHealth(undefined),
  };
}
