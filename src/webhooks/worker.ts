import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.js';
import type { DomainBus } from '../events/bus.js';
import { isStoreUnavailable } from '../store/errors.js';
import { StoreOutageLog } from '../store/outage-log.js';
import type { Store } from '../store/store.js';
import type { Resolver } from './address-policy.js';
import { envelopeBody } from './event-types.js';
import type { WebhookMetrics } from './metrics.js';
import { type ClaimedDelivery, type Completion, Outbox } from './outbox.js';
import { type AttemptResult, backoffAfter, MAX_ATTEMPTS, verdict } from './schedule.js';
import { WebhookSender } from './sender.js';
import { signatureHeader, signingSecrets } from './signing.js';
import { DRAIN_LIMIT_MS } from '../process/stop-signals.js';

export interface WorkerOptions {
  store: Store;
  bus: DomainBus;
  clock: Clock;
  logger: Logger;
  metrics: WebhookMetrics;
  timeoutMs: number;
  backoffBaseMs: number;
  allowPrivate: boolean;
  resolve?: Resolver;
  /** Attempts in flight at once in this process. */
  concurrency?: number;
  /** Fallback poll for work written by other processes (the CLI, other instances). */
  pollMs?: number;
  /** How long finished events and their attempt records are kept. */
  retentionMs?: number;
  /** How long stop() lets attempts in flight run before cutting them (default STOP_CUT_MS). */
  stopCutMs?: number;
  /**
   * Subscribes to wake-ups from other processes (PostgreSQL LISTEN); returns the unsubscribe.
   * Without it, work written elsewhere is found by the poll. Its connection's failures go to
   * `outage`, the worker's own, so one outage is one warning whichever part noticed it first.
   */
  listen?: (wake: () => void, outage: StoreOutageLog) => { close(): Promise<void> };
}

export const DEFAULT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
/** Beyond the wait for a slot and the attempt's own timeout, how long a claim is held before it may be claimed again. */
const LEASE_MARGIN_MS = 5_000;
/** How many slots' worth of outcomes may wait to be written before claims stop. */
const BACKLOG_SLOTS = 4;
const INTERRUPTED = 'interrupted: the worker stopped before this attempt recorded an outcome';
/**
 * docs/webhooks.md, Shutdown: from the signal, attempts in flight get at most this long (and at most
 * WEBHOOK_TIMEOUT_MS), then are cut and recorded as timed out. The rest of the drain limit is for
 * writing their outcomes and closing the store: an attempt allowed its whole timeout (up to 300 s,
 * 30 s by default) would outlast the 30 s limit, exit 1 and leave its outcome unwritten.
 */
export const STOP_CUT_MS = DRAIN_LIMIT_MS - 5_000;
const STOPPED = 'timeout: the worker stopped (SIGTERM) before a complete response; retried';

/**
 * The delivery worker: fans committed events out to endpoints, claims due deliveries, makes one
 * signed attempt each, and records every outcome. Woken by `event.recorded` after a commit in this
 * process, by a PostgreSQL NOTIFY after a commit in another, by its own timers for scheduled
 * retries, and by a poll as the fallback.
 */
export class WebhookWorker {
  readonly outbox: Outbox;
  /**
   * The database going away is logged once for the whole worker (poll, fan-out, outcome writes,
   * wake-ups) and once when it answers again; anything else that fails is logged in full.
   */
  readonly outage: StoreOutageLog;
  private readonly sender: WebhookSender;
  private readonly concurrency: number;
  private readonly claimBatch: number;
  private readonly pollMs: number;
  private readonly retentionMs: number;
  private running = false;
  private busy = false;
  private fanning = false;
  private again = false;
  private eventsWaiting = true;
  /** Attempts being sent. */
  private inFlight = 0;
  /** Attempts claimed whose outcome is not written yet (sending, or waiting for the batch write). */
  private unrecorded = 0;
  /** Claimed, waiting for a free slot. */
  private readonly ready: ClaimedDelivery[] = [];
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private pending: PendingOutcome[] = [];
  private flushing: Promise<void> | undefined;
  private readonly idle = new Set<() => void>();
  private unsubscribe: (() => void) | undefined;
  private listener: { close(): Promise<void> } | undefined;
  private lastPurge = 0;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.outbox = new Outbox(options.store);
    this.outage = new StoreOutageLog(options.logger, 'webhook delivery');
    this.sender = new WebhookSender({
      timeoutMs: options.timeoutMs,
      allowPrivate: options.allowPrivate,
      ...(options.resolve ? { resolve: options.resolve } : {}),
    });
    this.concurrency = options.concurrency ?? 64;
    this.claimBatch = Math.max(1, Math.floor((2 * this.concurrency) / 8));
    this.pollMs = options.pollMs ?? 500;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    if (this.options.store.dialect === 'sqlite') {
      const released = await this.outbox.releaseAbandonedLeases(this.options.clock.now());
      if (released > 0) this.options.logger.warn({ released }, 'webhook attempts interrupted by a restart');
    }
    const wake = () => {
      this.eventsWaiting = true;
      this.kick();
    };
    this.unsubscribe = this.options.bus.on('event.recorded', wake);
    this.listener = this.options.listen?.(wake, this.outage);
    this.kick();
  }

  /**
   * Stops claiming, lets attempts in flight finish (for at most `stopCutMs`, then they are cut as
   * timed out) and records them. Called again, it waits for the same stop.
   */
  stop(): Promise<void> {
    if (!this.running) return this.stopping ?? Promise.resolve();
    this.running = false;
    this.stopping = (async () => {
      const cut = setTimeout(() => this.sender.cut(), this.options.stopCutMs ?? STOP_CUT_MS);
      try {
        this.unsubscribe?.();
        await this.listener?.close();
        if (this.timer) clearTimeout(this.timer);
        while (this.working()) {
          await new Promise<void>((resolve) => this.idle.add(resolve));
        }
      } finally {
        clearTimeout(cut);
      }
      this.sender.close();
    })();
    return this.stopping;
  }

  /** Runs a pass soon; passes never overlap, a request during one runs another after it. */
  kick(): void {
    if (!this.running) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    setImmediate(() => void this.pass());
  }

  private async pass(): Promise<void> {
    let claimedAll = false;
    try {
      do {
        this.again = false;
        const now = this.options.clock.now();
        if (this.eventsWaiting) this.fanOut();
        // Claims run ahead of the slots by one batch (`ready`): a slot that frees up starts the next
        // claimed delivery at once instead of waiting a database round trip for it.
        const room = 2 * this.concurrency - this.inFlight - this.ready.length;
        const busyEnough = this.inFlight + this.ready.length > 0;
        // Claim in batches: with work in hand, wait until an eighth of the room is free, so one
        // claim statement serves many deliveries; the attempts finishing meanwhile kick again. An
        // idle worker claims whatever is due at once (lag). Outcomes waiting for a slow database
        // hold their leases: past a bound, no more claims until they are written (a write takes
        // milliseconds, a lease seconds).
        claimedAll =
          (busyEnough && room < this.claimBatch) ||
          this.unrecorded - this.inFlight >= BACKLOG_SLOTS * this.concurrency;
        if (!claimedAll && room > 0 && this.running) {
          // A claimed delivery may wait in `ready` while every slot is busy (at most one attempt's
          // timeout: the attempts in flight all started before it was claimed), then makes its own
          // attempt (at most another). A lease of one timeout ran out under a slow endpoint while the
          // attempt was still in flight, and the delivery was claimed and sent again.
          const lease = new Date(now.getTime() + 2 * this.options.timeoutMs + LEASE_MARGIN_MS);
          const claimed = await this.outbox.claim(now, room, lease);
          this.outage.answered();
          this.ready.push(...claimed);
          this.launchReady();
          claimedAll = claimed.length === room;
        }
        if (this.running && now.getTime() - this.lastPurge > PURGE_EVERY_MS) {
          this.lastPurge = now.getTime();
          void this.purge(now);
        }
      } while (this.again && this.running);
      if (this.running && !claimedAll) await this.armTimer();
      else if (this.running) this.arm(this.pollMs); // the attempts under way kick again; this is a backstop
    } catch (err) {
      if (!this.outage.unreachable(err)) this.options.logger.error({ err }, 'webhook worker pass failed');
      if (this.running) this.arm(this.pollMs);
    } finally {
      this.busy = false;
      if (this.again && this.running) this.kick();
      this.notifyIdle();
    }
  }

  /**
   * Fans events out in a loop of its own, beside the claims: a claim pass that waited for a batch of
   * 500 events to be fanned out would leave every free slot idle meanwhile. Each batch kicks a claim.
   */
  private fanOut(): void {
    if (this.fanning || !this.running) return;
    this.fanning = true;
    void (async () => {
      try {
        while (this.running && this.eventsWaiting) {
          this.eventsWaiting = false;
          const handled = await this.outbox.fanOut(this.options.clock.now());
          this.outage.answered();
          if (handled > 0) {
            this.eventsWaiting = true; // a full batch may have left more behind
            this.kick();
          }
        }
      } catch (err) {
        if (!this.outage.unreachable(err)) this.options.logger.error({ err }, 'webhook fan-out failed');
        this.eventsWaiting = true;
        if (this.running) this.arm(this.pollMs);
      } finally {
        this.fanning = false;
        this.notifyIdle();
      }
    })();
  }

  /** Sleeps until the next due delivery, at most one poll interval. */
  private async armTimer(): Promise<void> {
    const next = await this.outbox.nextDueAt();
    this.outage.answered();
    const now = this.options.clock.now().getTime();
    const wait = next === null ? this.pollMs : Math.min(this.pollMs, Math.max(0, next.getTime() - now));
    this.arm(wait);
  }

  private arm(waitMs: number): void {
    const at = Date.now() + waitMs;
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.eventsWaiting = true;
      this.kick();
    }, waitMs);
  }

  /**
   * The slot is freed when the attempt ends, not when its outcome is written: the write is batched
   * with others and a slot held through it would leave the receiver idle for a round trip.
   */
  /** Starts claimed deliveries while slots are free (also while stopping: they are claimed). */
  private launchReady(): void {
    while (this.inFlight < this.concurrency && this.ready.length > 0) this.launch(this.ready.shift()!);
  }

  private launch(delivery: ClaimedDelivery): void {
    this.inFlight += 1;
    this.unrecorded += 1;
    let sent = false;
    const release = () => {
      if (sent) return;
      sent = true;
      this.inFlight -= 1;
      this.launchReady();
      this.kick();
    };
    void this.attempt(delivery)
      .then((completion) => {
        release();
        return this.record(completion);
      })
      .catch((err: unknown) => {
        // An outcome the database did not take: the lease runs out and the delivery is claimed again.
        if (!this.outage.unreachable(err))
          this.options.logger.error({ err, delivery: delivery.id }, 'webhook attempt failed');
      })
      .finally(() => {
        release();
        this.unrecorded -= 1;
        // A claim may have been held back for unwritten outcomes; this one is written now.
        this.kick();
        this.notifyIdle();
      });
  }

  /** One attempt of one delivery, turned into what must be written. */
  private async attempt(delivery: ClaimedDelivery): Promise<Completion> {
    const { metrics, clock } = this.options;
    const records: Completion['records'] = [];
    let attempt = delivery.attempt;
    /** The interrupted attempt's line, once it is known whether (and when) it is retried. */
    const logInterrupted = (nextAttemptAt: Date | null) =>
      this.logAttempt(
        delivery,
        delivery.attempt - 1,
        { error: 'interrupted' },
        0,
        nextAttemptAt ? 'retry' : 'failed',
        nextAttemptAt,
      );
    if (delivery.interrupted) {
      // The previous claim's attempt has no outcome: its worker died. It stays counted (the sequence
      // never starts over) and is recorded as interrupted; the receiver may have seen it, which is
      // why receivers deduplicate on the event id.
      records.push({
        attempt: attempt - 1,
        statusCode: null,
        durationMs: 0,
        error: INTERRUPTED,
        responseExcerpt: null,
        at: clock.now(),
      });
      metrics.failures.inc({ reason: 'interrupted' });
      if (attempt - 1 >= MAX_ATTEMPTS) {
        logInterrupted(null);
        metrics.deliveries.inc({ outcome: 'failed' });
        return this.final(delivery, records, 'failed', attempt - 1, null, INTERRUPTED);
      }
    }
    if (delivery.endpoint.disabled_at !== null) {
      // Not retried after all: the delivery fails without a send.
      if (delivery.interrupted) logInterrupted(null);
      attempt -= 1; // nothing is sent: no attempt is used
      metrics.deliveries.inc({ outcome: 'failed' });
      return this.final(delivery, records, 'failed', attempt, null, 'the endpoint is disabled');
    }
    if (attempt === 1 && delivery.round === 1) {
      metrics.lag.observe(Math.max(0, clock.now().getTime() - Date.parse(delivery.event.created_at)) / 1000);
    }
    const body = envelopeBody(delivery.event);
    const started = clock.now();
    // Retried by this very claim: its next attempt starts now, the time recorded for that attempt.
    // (Until 2026-11-29 the line said `retry` with `nextAttemptAt: null`.)
    if (delivery.interrupted) logInterrupted(started);
    const timestamp = Math.floor(started.getTime() / 1000);
    const outcome = await this.sender.send({
      url: delivery.endpoint.url,
      body,
      headers: {
        'x-webhook-signature': signatureHeader(signingSecrets(delivery.endpoint, started), timestamp, body),
        'x-webhook-attempt': String(attempt),
        'x-webhook-id': delivery.event.id,
      },
    });
    metrics.duration.observe(outcome.durationMs / 1000);
    const result = outcome.result;
    const statusCode = result.kind === 'response' ? result.status : null;
    const error = describe(result);
    records.push({
      attempt,
      statusCode,
      durationMs: outcome.durationMs,
      error,
      responseExcerpt: outcome.excerpt,
      at: started,
    });
    const v = verdict(result, attempt);
    const next =
      v === 'retry'
        ? new Date(clock.now().getTime() + backoffAfter(attempt, this.options.backoffBaseMs))
        : null;
    this.logAttempt(
      delivery,
      attempt,
      statusCode === null ? { error: result.kind } : { status: statusCode },
      outcome.durationMs,
      v === 'failed_and_disable' ? 'failed' : v,
      next,
    );
    if (v === 'delivered') {
      metrics.attempts.inc({ result: 'delivered' });
      metrics.deliveries.inc({ outcome: 'delivered' });
      return this.final(delivery, records, 'delivered', attempt, statusCode, null);
    }
    metrics.failures.inc({ reason: reasonOf(result) });
    if (next) {
      metrics.attempts.inc({ result: 'retry' });
      return {
        delivery,
        records,
        status: 'pending',
        attemptCount: attempt,
        nextAttemptAt: next,
        lastStatusCode: statusCode,
        lastError: error,
        disableEndpoint: null,
      };
    }
    metrics.attempts.inc({ result: 'failed' });
    metrics.deliveries.inc({ outcome: 'failed' });
    const completion = this.final(delivery, records, 'failed', attempt, statusCode, error);
    if (v === 'failed_and_disable') {
      completion.disableEndpoint = 'the endpoint answered 410 Gone';
    }
    return completion;
  }

  /**
   * One info line per attempt (docs/webhooks.md, Logs). The endpoint is named by its id only: its
   * URL may carry a token in its path or query, and the secret, the signature and the payload never
   * reach the log. `error` is the kind of failure (`timeout`, `connection`, `refused`,
   * `interrupted`), not the network library's message.
   */
  private logAttempt(
    delivery: ClaimedDelivery,
    attempt: number,
    answer: { status: number } | { error: string },
    durationMs: number,
    result: 'delivered' | 'retry' | 'failed',
    nextAttemptAt: Date | null,
  ): void {
    this.options.logger.info(
      {
        endpointId: delivery.endpointId,
        deliveryId: delivery.id,
        eventId: delivery.event.id,
        eventType: delivery.event.type,
        attempt,
        round: delivery.round,
        ...answer,
        ms: Math.round(durationMs * 10) / 10,
        result,
        nextAttemptAt: nextAttemptAt?.toISOString() ?? null,
      },
      'webhook attempt',
    );
  }

  private final(
    delivery: ClaimedDelivery,
    records: Completion['records'],
    status: 'delivered' | 'failed',
    attemptCount: number,
    lastStatusCode: number | null,
    lastError: string | null,
  ): Completion {
    return {
      delivery,
      records,
      status,
      attemptCount,
      nextAttemptAt: null,
      lastStatusCode,
      lastError,
      disableEndpoint: null,
    };
  }

  /**
   * Outcomes are written in batches: whatever finished while the last write ran goes in the next.
   * Resolves when this outcome is written, rejects when it is not (its lease then runs out and the
   * delivery is claimed again).
   */
  private async record(completion: Completion): Promise<void> {
    const written = new Promise<void>((resolve, reject) =>
      this.pending.push({ completion, settle: (err) => (err === undefined ? resolve() : reject(err)) }),
    );
    if (completion.nextAttemptAt) this.arm(Math.max(0, completion.nextAttemptAt.getTime() - Date.now()));
    // The first outcome after a quiet spell waits one turn of the event loop, so the attempts that
    // answered in the same turn share its write instead of queueing behind a write of one.
    if (!this.flushing && this.pending.length === 1) await new Promise((resolve) => setImmediate(resolve));
    this.flush();
    return written;
  }

  /** Writes what is pending, one batch at a time, until nothing is. */
  private flush(): void {
    if (this.flushing || this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.write(batch).finally(() => {
      this.flushing = undefined;
      this.flush();
      this.notifyIdle();
    });
  }

  /**
   * One statement for the batch. When the database refuses it for anything but an outage, each
   * outcome is written alone: one row it will not take (a NUL in a receiver's reply did, on
   * PostgreSQL) must not fail the rest, or every delivery in the batch, other endpoints' too, is
   * sent again when its lease runs out (29 POSTs for 10 events, measured on 2026-11-29).
   */
  private async write(batch: PendingOutcome[]): Promise<void> {
    try {
      await this.outbox.complete(
        batch.map((p) => p.completion),
        this.options.clock.now(),
      );
      this.outage.answered();
      for (const p of batch) p.settle();
      return;
    } catch (err) {
      if (isStoreUnavailable(err)) {
        for (const p of batch) p.settle(err);
        return;
      }
    }
    for (const p of batch) p.settle(await this.writeAlone(p.completion, batch.length > 1));
  }

  /**
   * One outcome alone (as it is, unless that was just refused), then, if the database still refuses
   * it, without the text the receiver or the network supplied: the outcome (delivered, retried or
   * failed) matters more than the excerpt, and an outcome never written is an attempt repeated.
   * Resolves to the error when neither is taken.
   */
  private async writeAlone(completion: Completion, asIs: boolean): Promise<unknown> {
    if (asIs) {
      try {
        await this.outbox.complete([completion], this.options.clock.now());
        return undefined;
      } catch (err) {
        if (isStoreUnavailable(err)) return err;
      }
    }
    try {
      await this.outbox.complete([withoutForeignText(completion)], this.options.clock.now());
      this.options.logger.warn(
        { delivery: completion.delivery.id, endpoint: completion.delivery.endpointId },
        'webhook outcome refused by the database as received; recorded without the response excerpt and error text',
      );
      return undefined;
    } catch (err) {
      return err;
    }
  }

  private async purge(now: Date): Promise<void> {
    try {
      const cutoff = new Date(now.getTime() - this.retentionMs);
      let purged = 0;
      for (let n = await this.outbox.purge(cutoff); n > 0; n = await this.outbox.purge(cutoff)) {
        purged += n;
        if (!this.running) break;
      }
      if (purged > 0) this.options.logger.info({ purged }, 'purged finished webhook events');
    } catch (err) {
      if (!this.outage.unreachable(err)) this.options.logger.warn({ err }, 'webhook event purge failed');
    }
  }

  /** Anything claimed, being fanned out, sent or not yet recorded: what stop() waits for. */
  private working(): boolean {
    return (
      this.unrecorded > 0 ||
      this.ready.length > 0 ||
      this.busy ||
      this.fanning ||
      this.pending.length > 0 ||
      this.flushing !== undefined
    );
  }

  private notifyIdle(): void {
    if (this.working()) return;
    for (const resolve of this.idle) resolve();
    this.idle.clear();
  }
}

/** An outcome waiting for its batch write, with the way to tell its attempt how that went. */
interface PendingOutcome {
  completion: Completion;
  settle: (err?: unknown) => void;
}

/** The outcome with the receiver's excerpt dropped and error texts cut to printable ASCII. */
function withoutForeignText(completion: Completion): Completion {
  const ascii = (text: string | null) => (text === null ? null : text.replace(/[^\x20-\x7e]/g, '?'));
  return {
    ...completion,
    lastError: ascii(completion.lastError),
    records: completion.records.map((r) => ({ ...r, error: ascii(r.error), responseExcerpt: null })),
  };
}

function describe(result: AttemptResult): string | null {
  switch (result.kind) {
    case 'response':
      return result.status < 400 ? null : `HTTP ${result.status}`;
    case 'timeout':
      return result.stopped ? STOPPED : 'timeout: no complete response within WEBHOOK_TIMEOUT_MS';
    case 'connection':
      return `connection error: ${result.message}`;
    case 'refused':
      return `refused: ${result.message}`;
  }
}

function reasonOf(result: AttemptResult): string {
  if (result.kind === 'response') return result.status >= 500 ? 'http_5xx' : 'http_4xx';
  return result.kind;
}
