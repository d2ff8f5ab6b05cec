import type { Redis } from 'ioredis';
import type { Broadcast } from './broadcast.js';
import type { Cache } from './cache.js';
import { MemoryBroadcast } from './memory-broadcast.js';
import { MemoryCache } from './memory-cache.js';
import { MemorySlidingWindowLimiter } from './memory-limiter.js';
import type { SlidingWindowLimiter } from './rate-limiter.js';
import { RedisBroadcast } from './redis-broadcast.js';
import { RecoveringCache } from './recovering-cache.js';
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
  /**
   * For a process about to exit: carries out the cache invalidations Redis missed, waiting up to
   * `waitMs` for it to answer; resolves with how many are still owed (Infinity: the whole cache).
   * Always 0 without Redis (nothing to miss).
   */
  flushCacheInvalidations(waitMs: number): Promise<number>;
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
    // Each call to Redis through sharedHealth (a clear is several); a delete that misses Redis is
    // carried out when it answers again (src/shared/recovering-cache.ts).
    const cache = new RecoveringCache(
      new RedisCache(redis, `${keyPrefix}cache:`, (call) => sharedHealth.call(call)),
      sharedHealth,
    );
    return {
      limiter: failFast(sharedHealth, new RedisSlidingWindowLimiter(redis, `${keyPrefix}rl:`)),
      cache,
      broadcast: new RedisBroadcast(redis, broadcastPrefix(redis, keyPrefix), sharedHealth),
      sharedHealth,
      flushCacheInvalidations: (waitMs) => cache.flush(waitMs),
    };
  }
  return {
    limiter: new MemorySlidingWindowLimiter(),
    cache: new MemoryCache(),
    broadcast: new MemoryBroadcast(),
    sharedHealth: new SharedStateHealth(undefined),
    flushCacheInvalidations: async () => 0,
  };
}

/**
 * Keys live in REDIS_URL's database, but pub/sub channels are one namespace for the whole Redis
 * server, whatever the database. Deployments that share a server under different database numbers
 * would hear each other's broadcasts (and act on each other's catch-up signals), so the channels of
 * a database other than 0 carry its number. Database 0 keeps the names it always had.
 */
export function broadcastPrefix(redis: Redis, keyPrefix: string): string {
  const db = Number(redis.options.db ?? 0);
  return db === 0 ? `${keyPrefix}bc:` : `${keyPrefix}db${db}:bc:`;
}
