import type { Redis } from 'ioredis';
import type { Broadcast } from './broadcast.js';
import type { Cache } from './cache.js';
import { MemoryBroadcast } from './memory-broadcast.js';
import { MemoryCache } from './memory-cache.js';
import { MemorySlidingWindowLimiter } from './memory-limiter.js';
import type { SlidingWindowLimiter } from './rate-limiter.js';
import { RedisBroadcast } from './redis-broadcast.js';
import { RedisCache } from './redis-cache.js';
import { RedisSlidingWindowLimiter } from './redis-limiter.js';

export interface SharedState {
  limiter: SlidingWindowLimiter;
  cache: Cache;
  /** Messages to every instance (GraphQL subscriptions); close it on shutdown. */
  broadcast: Broadcast;
}

/**
 * With Redis, limits and caches are shared by every instance; without it they live in this
 * process, which is right for the single-process default and for tests.
 */
export function createSharedState(redis: Redis | undefined, keyPrefix = 'atrium:'): SharedState {
  if (redis) {
    return {
      limiter: new RedisSlidingWindowLimiter(redis, `${keyPrefix}rl:`),
      cache: new RedisCache(redis, `${keyPrefix}cache:`),
      broadcast: new RedisBroadcast(redis, `${keyPrefix}bc:`),
    };
  }
  return {
    limiter: new MemorySlidingWindowLimiter(),
    cache: new MemoryCache(),
    broadcast: new MemoryBroadcast(),
  };
}
