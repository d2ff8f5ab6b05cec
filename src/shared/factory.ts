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
import { failFast, SharedStateHealth } from './health.js';

export interface SharedState {
  limiter: SlidingWindowLimiter;
  cache: Cache;
  /** Messages to every instance (GraphQL subscriptions); close it on shutdown. */
  broadcast: Broadcast;
  /** Whether Redis answers, and what went ahead without it (metrics, one log line per outage). */
  sharedHealth: SharedStateHealth;
}

/**
 * With Redis, limits and caches are shared by every instance; without it they live in this
 * process, which is right for the single-process default and for tests. Every call to Redis goes
 * through `sharedHealth`: it fails at once while Redis is down or silent and never waits longer
 * than REDIS_CALL_TIMEOUT_MS, so a Redis outage of either kind only degrades (src/shared/health.ts).
 */
export function createSharedState(redis: Redis | undefined, keyPrefix = 'atrium:'): SharedState {
  if (redis) {
    const sharedHealth = new SharedStateHealth(redis);
    return {
      limiter: failFast(sharedHealth, new RedisSlidingWindowLimiter(redis, `${keyPrefix}rl:`)),
      cache: failFast(sharedHealth, new RedisCache(redis, `${keyPrefix}cache:`)),
      broadcast: new RedisBroadcast(redis, `${keyPrefix}bc:`, sharedHealth),
      sharedHealth,
    };
  }
  return {
    limiter: new MemorySlidingWindowLimiter(),
    cache: new MemoryCache(),
    broadcast: new MemoryBroadcast(),
    sharedHealth: new SharedStateHealth(undefined),
  };
}
