import { createHash } from 'node:crypto';
import type { SharedStateHealth } from '../shared/health.js';
import type { RateDecision, SlidingWindowLimiter } from '../shared/rate-limiter.js';
import { TooManyAttempts } from './errors.js';

export interface FailureRule {
  limit: number;
  windowSeconds: number;
}

/**
 * Failures allowed before a caller is made to wait. Client secrets are 256-bit random, so the
 * per-client limit is about load and noise, not guessing; passwords are guessable, so they get the
 * same small budget per account. The per-address budget is wider because offices and mobile
 * carriers put many honest users behind one address.
 */
export const CLIENT_AUTH_FAILURES = {
  perIdentifier: { limit: 10, windowSeconds: 300 },
  perAddress: { limit: 30, windowSeconds: 300 },
};
export const LOGIN_FAILURES = {
  perIdentifier: { limit: 10, windowSeconds: 300 },
  perAddress: { limit: 30, windowSeconds: 300 },
};

/**
 * Counts failed attempts per identifier (client id, login name) and per source address, through
 * the shared sliding-window limiter so every instance sees the same counts. Only failures count;
 * once either budget is spent every attempt is refused, right or wrong, until the window moves.
 *
 * When the limiter's store cannot answer (Redis down) counting is suspended, as REST rate limits
 * fail open: the attempt is judged on its credentials alone, counted in
 * `atrium_shared_state_degraded_total{component="brute_force_<name>"}` and logged once per outage.
 * Refusing every sign-in and token request for the length of a Redis outage would make the
 * shared counter a single point of failure for the whole token server.
 */
export class BruteForceGuard {
  constructor(
    private readonly limiter: SlidingWindowLimiter,
    private readonly name: string,
    private readonly rules: { perIdentifier: FailureRule; perAddress: FailureRule },
    private readonly health?: SharedStateHealth,
  ) {}

  /**
   * Throws TooManyAttempts when either budget is already spent. Without an identifier (a request
   * too malformed to name a client) only the address's budget applies.
   */
  async check(identifier: string | undefined, address: string): Promise<void> {
    const { perIdentifier: id, perAddress: addr } = this.rules;
    const decisions = await this.degrading<RateDecision[]>([], () =>
      Promise.all([
        this.limiter.peek(this.addressKey(address), addr.limit, addr.windowSeconds),
        ...(identifier === undefined
          ? []
          : [this.limiter.peek(this.idKey(identifier), id.limit, id.windowSeconds)]),
      ]),
    );
    const refused = decisions.filter((d) => !d.allowed);
    if (refused.length > 0) throw new TooManyAttempts(Math.max(...refused.map((d) => d.retryAfter)));
  }

  async failed(identifier: string | undefined, address: string): Promise<void> {
    const { perIdentifier: id, perAddress: addr } = this.rules;
    await this.unreported(async () => {
      await Promise.all([
        this.limiter.hit(this.addressKey(address), addr.limit, addr.windowSeconds),
        ...(identifier === undefined
          ? []
          : [this.limiter.hit(this.idKey(identifier), id.limit, id.windowSeconds)]),
      ]);
      // Counting is what degrades; its own success (not a peek's or a reset's) says it is back.
      this.health?.served(`brute_force_${this.name}`);
    });
  }

  /** A success clears the identifier's own count (its owner's typos), never the address's. */
  async succeeded(identifier: string): Promise<void> {
    await this.unreported(() => this.limiter.reset(this.idKey(identifier)));
  }

  /**
   * An outcome's count or reset. Every attempt opens with `check()`, which reports an outage; a
   * second report here would count the one attempt twice in the metric ("each unchecked attempt").
   */
  private async unreported(call: () => Promise<void>): Promise<void> {
    try {
      await call();
    } catch (err) {
      if (!this.health) throw err;
    }
  }

  /** Runs a call to the limiter; if its store cannot answer, reports that and goes on with `fallback`. */
  private async degrading<T>(fallback: T, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!this.health) throw err;
      this.health.degraded(
        `brute_force_${this.name}`,
        `${this.name} failure counting suspended (attempts are not limited)`,
        err,
      );
      return fallback;
    }
  }

  // Identifiers are hashed: keys stay short, and login names never sit in Redis in clear.
  private idKey(identifier: string): string {
    return `bf:${this.name}:id:${createHash('sha256').update(identifier.trim().toLowerCase()).digest('base64url')}`;
  }

  private addressKey(address: string): string {
    return `bf:${this.name}:addr:${address}`;
  }
}
