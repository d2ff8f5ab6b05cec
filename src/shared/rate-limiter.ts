/**
 * An exact sliding-log limiter: a request counts for `windowSeconds` after it was made. Shared
 * between instances when backed by Redis; the memory implementation serves one process.
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Requests still allowed in the window after this one (0 when refused). */
  remaining: number;
  /** Unix seconds at which the oldest counted request leaves the window. */
  resetAt: number;
  /** Whole seconds until then, at least 1 (meaningful when refused). */
  retryAfter: number;
}

export interface SlidingWindowLimiter {
  /**
   * Counts one request for `key` if it fits under `limit`; refused requests are not counted. With
   * `cost` (a whole number, default 1) the request counts that many points, and fits only if all of
   * them do: the GraphQL complexity budget spends a query's points this way. A key is spent either
   * always with a cost or never (the Redis store counts the two ways differently).
   */
  hit(key: string, limit: number, windowSeconds: number, cost?: number): Promise<RateDecision>;
  /** The decision a hit would get now, without counting anything. */
  peek(key: string, limit: number, windowSeconds: number): Promise<RateDecision>;
  /** Forgets every request counted for `key` (for example after a successful login). */
  reset(key: string): Promise<void>;
}
