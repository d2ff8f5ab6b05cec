/** Attempts per round; after the fifth failure the delivery is failed (decisions §7). */
export const MAX_ATTEMPTS = 5;

/** The wait after failed attempt `n` (1-based): base × 2^(n-1), so attempts start at 0, 1, 3, 7, 15 units. */
export const backoffAfter = (attempt: number, baseMs: number): number => baseMs * 2 ** (attempt - 1);

/** What an attempt came to: a response status, or an error before one arrived. */
export type AttemptResult =
  | { kind: 'response'; status: number }
  /** `stopped`: cut by the worker's stop (SIGTERM) before the receiver had answered. */
  | { kind: 'timeout'; stopped?: boolean }
  | { kind: 'connection'; message: string }
  /** The target resolved to an address the SSRF rule forbids: never retried. */
  | { kind: 'refused'; message: string };

export type Verdict = 'delivered' | 'retry' | 'failed' | 'failed_and_disable';

/**
 * The retry rules in one place: below 400 delivered; 408, 429, 5xx, timeouts and connection errors
 * retried; 410 fails and disables the endpoint; any other 4xx fails at once. A retryable outcome on
 * the last attempt is a failure.
 */
export function verdict(result: AttemptResult, attempt: number): Verdict {
  const retry: Verdict = attempt >= MAX_ATTEMPTS ? 'failed' : 'retry';
  switch (result.kind) {
    case 'timeout':
    case 'connection':
      return retry;
    case 'refused':
      return 'failed';
    case 'response': {
      const s = result.status;
      if (s < 400) return 'delivered';
      if (s === 410) return 'failed_and_disable';
      if (s === 408 || s === 429 || s >= 500) return retry;
      return 'failed';
    }
  }
}
