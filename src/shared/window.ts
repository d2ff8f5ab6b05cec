import type { RateDecision } from './rate-limiter.js';

/** The largest window either implementation accepts: a day, well beyond any limit Atrium sets. */
const MAX_WINDOW_SECONDS = 86_400;

/**
 * Refuses arguments that would make a limiter silently allow everything (NaN, negative, fractional
 * limits) so a misconfigured caller fails loudly instead of disabling its own limit.
 */
export function windowMs(limit: number, windowSeconds: number): number {
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw new RangeError(`rate limit must be a non-negative safe integer, got ${limit}`);
  }
  if (!Number.isFinite(windowSeconds) || windowSeconds <= 0 || windowSeconds > MAX_WINDOW_SECONDS) {
    throw new RangeError(`rate-limit window must be above 0 and at most ${MAX_WINDOW_SECONDS} s`);
  }
  return Math.max(1, Math.round(windowSeconds * 1000));
}

export interface WindowState {
  allowed: boolean;
  limit: number;
  /** Requests in the window, counting the one being decided when it is allowed. */
  counted: number;
  /** When the oldest counted request was made (the decided one itself when the log was empty). */
  oldestMs: number;
  nowMs: number;
  windowMs: number;
}

/** One place turns a window's state into the numbers clients see, so both stores agree exactly. */
export function toDecision(s: WindowState): RateDecision {
  const leavesAtMs = s.oldestMs + s.windowMs;
  return {
    allowed: s.allowed,
    limit: s.limit,
    remaining: s.allowed ? Math.max(0, s.limit - s.counted) : 0,
    // Rounded up: at resetAt the oldest request has certainly left, so a retry then succeeds.
    resetAt: Math.ceil(leavesAtMs / 1000),
    retryAfter: Math.max(1, Math.ceil((leavesAtMs - s.nowMs) / 1000)),
  };
}

/** A request's weight in points: a positive safe integer, or the call is refused loudly. */
export function checkCost(cost: number): number {
  if (!Number.isSafeInteger(cost) || cost < 1) {
    throw new RangeError(`rate-limit cost must be a positive safe integer, got ${cost}`);
  }
  return cost;
}
