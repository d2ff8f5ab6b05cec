import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { broadcastPrefix } from './factory.js';
import { isPermissionRefusal } from './health.js';
import { RedisSlidingWindowLimiter } from './redis-limiter.js';

/**
 * At start, once connected: runs once each kind of command Atrium sends, on keys and a channel
 * under the prefixes its own use, and resolves with Redis's NOPERM when the ACL user REDIS_URL
 * gives may not run one of them; with nothing otherwise. The commands are run, not looked up (ACL
 * DRYRUN is Redis 7 only and needs a permission of its own, and ACL GETUSER needs admin rights):
 * what Redis answers them is what it will answer the process, key patterns, channel patterns
 * (Redis 7's users get none by default) and the commands the limiter's script calls included.
 * The same set for every role and admin command: one REDIS_URL serves the whole deployment.
 *
 * Anything but NOPERM (a connection dropped, no answer within `ms`) is let through: a Redis that
 * does not answer only degrades. The probe's keys expire within seconds should a delete fail.
 */
export async function refusedPermission(
  redis: Redis,
  ms: number,
  keyPrefix = 'atrium:',
): Promise<Error | undefined> {
  const probe = `start-probe:${randomBytes(6).toString('hex')}`;
  const cacheKey = `${keyPrefix}cache:${probe}`;
  const limiter = new RedisSlidingWindowLimiter(redis, `${keyPrefix}rl:`);
  const steps: Array<() => Promise<unknown>> = [
    () => redis.ping(),
    () => redis.set(cacheKey, '1', 'EX', 10),
    () => redis.get(cacheKey),
    () => redis.del(cacheKey),
    // The cache's clear: SCAN, then UNLINK of what it found (here a key that is gone).
    () => redis.scan('0', 'MATCH', cacheKey, 'COUNT', 1),
    () => redis.unlink(cacheKey),
    // EVALSHA, then EVAL where the script is not loaded yet, and the script's own commands.
    () => limiter.hit(probe, 1, 1),
    () => limiter.reset(probe),
    () => redis.publish(broadcastPrefix(redis, keyPrefix) + probe, ''),
    () => subscribeOnce(redis, broadcastPrefix(redis, keyPrefix) + probe),
  ];
  for (const step of steps) {
    const outcome = await within(step(), ms);
    if (outcome === TIMED_OUT) return undefined;
    if (outcome instanceof Error) {
      if (isPermissionRefusal(outcome)) return outcome;
      return undefined;
    }
  }
  return undefined;
}

export const TIMED_OUT = Symbol('timed out');

/** What `pending` settled with (undefined for a success, its error for a failure), or TIMED_OUT after `ms`. */
export async function within(pending: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve(TIMED_OUT), ms)));
  try {
    return await Promise.race([
      pending.then(
        () => undefined,
        (err: unknown) => err,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** SUBSCRIBE needs a connection of its own (the broadcast's listening one is made the same way). */
async function subscribeOnce(redis: Redis, channel: string): Promise<void> {
  // Queued until it connects: the cluster's check connection queues nothing, and would have this
  // SUBSCRIBE fail unsent, not refused.
  const listener = redis.duplicate({
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: true,
  });
  listener.on('error', () => undefined);
  try {
    await listener.subscribe(channel);
  } finally {
    listener.disconnect();
  }
}
