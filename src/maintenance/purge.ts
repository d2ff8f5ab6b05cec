import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { type Clock, iso } from '../domain/clock.js';
import { REFRESH_TOKEN_TTL_SECONDS } from '../oauth/tokens.js';
import { StoreOutageLog } from '../store/outage-log.js';
import type { Db, Store } from '../store/store.js';

/** How often the job runs (and once at start). */
export const PURGE_INTERVAL_MS = 10 * 60_000;
/** Rows one DELETE removes at most: short statements, short locks, whatever the backlog. */
export const PURGE_BATCH_SIZE = 500;
/** Batches per kind per run; a larger backlog is worked off over the next runs. */
export const PURGE_MAX_BATCHES = 20;

const DAY_MS = 86_400_000;
/** A used authorization code is kept a day past its expiry: replaying it still revokes what it issued. */
export const CODE_KEPT_AFTER_EXPIRY_MS = DAY_MS;
/** An expired refresh token is kept a day: presenting it then still revokes its family as stale. */
export const REFRESH_KEPT_AFTER_EXPIRY_MS = DAY_MS;
/** A family outlives its last token by this much (by then every token it issued has expired). */
export const FAMILY_LIFETIME_MS = REFRESH_TOKEN_TTL_SECONDS * 1000;

/**
 * One kind of row that only ever accumulates. `batch` deletes at most `limit` rows that are due at
 * `now` and returns how many it deleted.
 */
export interface PurgeKind {
  name: string;
  batch(db: Db, now: Date, limit: number): Promise<number>;
}

const deleted = (res: { numDeletedRows: bigint }) => Number(res.numDeletedRows);

/**
 * What Atrium purges, and when. Login tickets themselves are signed, self-expiring tokens (ten
 * minutes) that are never stored; only the ids of used ones are, until the ticket expires.
 */
export const PURGE_KINDS: readonly PurgeKind[] = [
  {
    // Replays are promised for IDEMPOTENCY_RETENTION_SECONDS (24 hours); expires_at marks the end.
    name: 'idempotency_records',
    async batch(db, now, limit) {
      const res = await db
        .deleteFrom('idempotency_records')
        .where(({ eb, refTuple, selectFrom }) =>
          eb(
            refTuple('owner_id', 'idem_key'),
            'in',
            selectFrom('idempotency_records')
              .select(['owner_id', 'idem_key'])
              .where('expires_at', '<=', iso(now))
              .limit(limit)
              .$asTuple('owner_id', 'idem_key'),
          ),
        )
        .executeTakeFirst();
      return deleted(res);
    },
  },
  {
    name: 'authorization_codes',
    async batch(db, now, limit) {
      const cutoff = iso(new Date(now.getTime() - CODE_KEPT_AFTER_EXPIRY_MS));
      const unusedCutoff = iso(now);
      const res = await db
        .deleteFrom('authorization_codes')
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('authorization_codes')
            .select('id')
            // An unused code is worthless once expired; a used one is kept for reuse detection.
            .where((w) =>
              w.or([
                w('expires_at', '<=', cutoff),
                w.and([w('used_at', 'is', null), w('expires_at', '<=', unusedCutoff)]),
              ]),
            )
            .limit(limit),
        )
        .executeTakeFirst();
      return deleted(res);
    },
  },
  {
    // A used ticket's id is needed only while the ticket's signature would still pass.
    name: 'used_login_tickets',
    async batch(db, now, limit) {
      const res = await db
        .deleteFrom('used_login_tickets')
        .where('ticket_id', 'in', (eb) =>
          eb
            .selectFrom('used_login_tickets')
            .select('ticket_id')
            .where('expires_at', '<=', iso(now))
            .limit(limit),
        )
        .executeTakeFirst();
      return deleted(res);
    },
  },
  {
    // Used tokens stay until they would have expired: presenting a used token is how theft shows
    // (RFC 9700 §4.14.2), and it revokes the family. Once expired they are only dead weight.
    name: 'refresh_tokens',
    async batch(db, now, limit) {
      const cutoff = iso(new Date(now.getTime() - REFRESH_KEPT_AFTER_EXPIRY_MS));
      const res = await db
        .deleteFrom('refresh_tokens')
        .where('id', 'in', (eb) =>
          eb.selectFrom('refresh_tokens').select('id').where('expires_at', '<=', cutoff).limit(limit),
        )
        .executeTakeFirst();
      return deleted(res);
    },
  },
  {
    // Revoked families past their lifetime, and families whose every token is gone and that are
    // older than a token's lifetime (sessions nobody refreshed). Their tokens go with them.
    name: 'refresh_token_families',
    async batch(db, now, limit) {
      const cutoff = iso(new Date(now.getTime() - FAMILY_LIFETIME_MS));
      const res = await db
        .deleteFrom('refresh_token_families')
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('refresh_token_families as f')
            .select('f.id')
            .where((w) =>
              w.or([
                w('f.revoked_at', '<=', cutoff),
                w.and([
                  w('f.created_at', '<=', cutoff),
                  w.not(
                    w.exists(
                      w.selectFrom('refresh_tokens as t').select('t.id').whereRef('t.family_id', '=', 'f.id'),
                    ),
                  ),
                ]),
              ]),
            )
            .limit(limit),
        )
        .executeTakeFirst();
      return deleted(res);
    },
  },
];

export interface PurgeOptions {
  intervalMs?: number;
  batchSize?: number;
  maxBatches?: number;
  kinds?: readonly PurgeKind[];
}

export interface PurgeDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** The registry /metrics serves. */
  metrics: Registry;
}

const COUNTER = 'atrium_purged_rows_total';

/**
 * The periodic purge of the `worker` role: every kind in bounded batches, once at start and then
 * every `intervalMs`. Several workers may run it at once; a row two of them pick is deleted once.
 */
export class PurgeJob {
  readonly #deps: PurgeDeps;
  readonly #intervalMs: number;
  readonly #batchSize: number;
  readonly #maxBatches: number;
  readonly #kinds: readonly PurgeKind[];
  readonly #purged: Counter<'kind'>;
  /** A database outage is one line while it lasts, not one stack per kind every run. */
  readonly #outage: StoreOutageLog;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #stopped = false;

  constructor(deps: PurgeDeps, options: PurgeOptions = {}) {
    this.#deps = deps;
    this.#intervalMs = options.intervalMs ?? PURGE_INTERVAL_MS;
    this.#batchSize = options.batchSize ?? PURGE_BATCH_SIZE;
    this.#maxBatches = options.maxBatches ?? PURGE_MAX_BATCHES;
    this.#kinds = options.kinds ?? PURGE_KINDS;
    this.#purged =
      (deps.metrics.getSingleMetric(COUNTER) as Counter<'kind'> | undefined) ??
      new Counter({
        name: COUNTER,
        help: 'Rows deleted by the purge job, by kind',
        labelNames: ['kind'],
        registers: [deps.metrics],
      });
    // Every kind shows in /metrics from the start, at 0.
    for (const kind of this.#kinds) this.#purged.inc({ kind: kind.name }, 0);
    this.#outage = new StoreOutageLog(deps.logger, {
      down: 'purge paused, retrying next run',
      up: 'purge resumed',
    });
  }

  /**
   * Runs every kind once; returns the rows deleted per kind. A database that cannot be reached
   * ends the run (every kind after would meet it too) and is logged once until a batch answers
   * again; any other failure of a kind is logged in full, and the next kind still runs.
   */
  async runOnce(): Promise<Record<string, number>> {
    const counts: Record<string, number> = Object.fromEntries(this.#kinds.map((k) => [k.name, 0]));
    for (const kind of this.#kinds) {
      try {
        for (let i = 0; i < this.#maxBatches && !this.#stopped; i++) {
          const n = await kind.batch(this.#deps.store.db, this.#deps.clock.now(), this.#batchSize);
          this.#outage.answered();
          counts[kind.name]! += n;
          this.#purged.inc({ kind: kind.name }, n);
          if (n < this.#batchSize) break;
          // Let requests in between batches (SQLite runs on this thread).
          await new Promise((resolve) => setImmediate(resolve));
        }
      } catch (err) {
        if (this.#outage.unreachable(err)) break;
        this.#deps.logger.warn({ err, kind: kind.name }, 'purge failed; retrying next run');
      }
    }
    if (Object.values(counts).some((n) => n > 0)) this.#deps.logger.info({ purged: counts }, 'purged');
    return counts;
  }

  start(): void {
    const tick = () => {
      this.#running = this.runOnce().finally(() => {
        this.#running = undefined;
        if (!this.#stopped) this.#timer = setTimeout(tick, this.#intervalMs).unref();
      });
    };
    this.#timer = setTimeout(tick, 0).unref();
  }

  /** Stops scheduling and waits for a run in progress (it ends after its current batch). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#running?.catch(() => undefined);
  }
}

/** Starts the purge for a `worker` process; the caller stops it on shutdown. */
export function startPurgeJob(deps: PurgeDeps, options?: PurgeOptions): PurgeJob {
  const job = new PurgeJob(deps, options);
  job.start();
  return job;
}
