import { isStoreUnavailable } from './errors.js';

interface Log {
  warn(obj: object, msg: string): void;
}

/**
 * What a component says about itself in the two lines: while the database is away (`down`,
 * "webhook delivery paused, retrying") and once it answers again (`up`, "webhook delivery resumed").
 */
export interface OutageWording {
  down: string;
  up: string;
}

/**
 * Logs a database outage once for a component that keeps meeting it: one warning, with the
 * error's message and code and no stack, when the database first cannot be reached, and one line
 * when a statement answers again, instead of one error with a stack per attempt (a 38 s PostgreSQL
 * restart used to leave 152 of them from the webhook worker alone). The same rule as Redis's
 * `SharedStateHealth`. Used by the webhook worker (its poll, fan-out and wake-up connection), the
 * purge job, and the requests a process serves (one for the process, `Services.storeOutage`: every
 * HTTP surface's 503, GraphQL, gRPC). A failure that is not about reaching the database (a wrong
 * statement, a bug) is not an outage: `unreachable` says false and the caller logs it in full,
 * every time.
 */
export class StoreOutageLog {
  #since: number | undefined;
  #failures = 0;
  readonly #wording: OutageWording;

  constructor(
    private readonly log: Log,
    /**
     * What stops while the database is away, as the lines name it ("webhook delivery": "paused,
     * retrying" and "resumed" are added), or both lines' words when those do not fit.
     */
    what: string | OutageWording,
  ) {
    this.#wording =
      typeof what === 'string' ? { down: `${what} paused, retrying`, up: `${what} resumed` } : what;
  }

  /** True while an outage has been logged and no statement has answered since. */
  get down(): boolean {
    return this.#since !== undefined;
  }

  /**
   * Takes a failure: true when it is the database being unreachable (logged once per outage, so
   * the caller logs nothing), false when it is anything else (the caller logs it in full).
   */
  unreachable(err: unknown): boolean {
    if (!isStoreUnavailable(err)) return false;
    this.#failures += 1;
    if (this.#since !== undefined) return true;
    this.#since = Date.now();
    const e = err as { message?: unknown; code?: unknown };
    this.log.warn(
      {
        err: typeof e.message === 'string' ? e.message : String(err),
        ...(typeof e.code === 'string' ? { code: e.code } : {}),
      },
      `database unreachable: ${this.#wording.down} (not logged again until it answers)`,
    );
    return true;
  }

  /** A statement answered: ends the outage, when there was one, with one line. */
  answered(): void {
    if (this.#since === undefined) return;
    const downMs = Date.now() - this.#since;
    const failures = this.#failures;
    this.#since = undefined;
    this.#failures = 0;
    // Warn, like the outage line, so a filter that shows one shows the other.
    this.log.warn({ downMs, failures }, `database answers again: ${this.#wording.up}`);
  }
}
