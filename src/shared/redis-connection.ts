import { Redis } from 'ioredis';
import { REDIS_CALL_TIMEOUT_MS } from './health.js';

/**
 * A connection that waits on Redis this long with commands outstanding and nothing received is
 * dropped and made again (ioredis `socketTimeout`). A hung Redis keeps its TCP connections open
 * but silent, so without this a connection whose replies will never come (a network path that
 * lost its state) would never be replaced, and a reconnection whose ready check hangs would wait
 * forever. Four times REDIS_CALL_TIMEOUT_MS: callers have long given up by then (and fail at once
 * meanwhile), while a server that is merely slow for a moment keeps its connection.
 */
export const REDIS_SOCKET_TIMEOUT_MS = 4 * REDIS_CALL_TIMEOUT_MS;

/**
 * The process's connection to Redis. Commands wait for a reconnection only briefly
 * (`maxRetriesPerRequest`), and the callers of src/shared never wait on it at all
 * (SharedStateHealth.call fails at once while it is not ready or not answering).
 */
export function connectRedis(url: string): Redis {
  return new Redis(url, {
    lazyConnect: false,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    socketTimeout: REDIS_SOCKET_TIMEOUT_MS,
  });
}
