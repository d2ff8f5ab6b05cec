import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import { isStoreUnavailable } from '../store/errors.js';
import type { Store } from '../store/store.js';

/**
 * How long a scrape waits for the backlog gauges' read of the database. The read is two small
 * aggregates that a healthy database answers in milliseconds; a scrape must answer well within
 * Prometheus's default scrape timeout (10 s) and sooner than /readyz's own bound (2 s,
 * READINESS_TIMEOUT_MS) whatever the database does, hung (a stopped server, a path that swallows
 * packets) included. A constant, not a setting, like the other bounds on waiting for a dependency.
 */
export const BACKLOG_READ_BUDGET_MS = 1000;

interface Backlog {
  pending: number;
  oldestSeconds: number;
}

/**
 * The backlog figures for one scrape, or undefined when the database failed or did not answer
 * within BACKLOG_READ_BUDGET_MS. The gauges of one scrape share one answer (so they agree with
 * `atrium_webhook_backlog_read_ok`), and a read still waiting on a hung database is waited on again
 * by the next scrape rather than a new one started beside it: scrapes every few seconds must not take one
 * pool connection each until the database answers.
 */
class BacklogRead {
  private reading: Promise<Backlog | undefined> | undefined;
  private scrape: Promise<Backlog | undefined> | undefined;

  constructor(
    private readonly store: Store,
    private readonly logger: Pick<Logger, 'error'>,
  ) {}

  current(): Promise<Backlog | undefined> {
    this.scrape ??= this.withinBudget().finally(() => (this.scrape = undefined));
    return this.scrape;
  }

  private withinBudget(): Promise<Backlog | undefined> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    const reading = this.reading;
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), BACKLOG_READ_BUDGET_MS);
      void reading.then((backlog) => {
        clearTimeout(timer);
        resolve(backlog);
      });
    });
  }

  /** Never rejects: a database that is away is what read_ok 0 says; anything else is also logged. */
  private async read(): Promise<Backlog | undefined> {
    try {
      // One statement, so a read waiting on a hung database holds one pool connection, not two.
      const row = await this.store.db
        .selectNoFrom((eb) => [
          eb
            .selectFrom('webhook_deliveries')
            .select((sub) => sub.fn.countAll<number>().as('n'))
            .where('status', '=', 'pending')
            .as('pending'),
          eb
            .selectFrom('events')
            .select((sub) => sub.fn.min('created_at').as('oldest'))
            .where('dispatched_at', 'is', null)
            .as('oldest'),
        ])
        .executeTakeFirst();
      const at = row?.oldest as string | null | undefined;
      return {
        pending: Number(row?.pending ?? 0),
        oldestSeconds: at ? Math.max(0, (Date.now() - Date.parse(at)) / 1000) : 0,
      };
    } catch (err) {
      // An outage shows in /readyz, the requests' outage line and read_ok; a wrong statement or a
      // bug would show nowhere else, so it is logged in full each time, as the worker's loops do.
      if (!isStoreUnavailable(err)) this.logger.error({ err }, 'webhook backlog gauges: read failed');
      return undefined;
    }
  }
}

/**
 * The worker's Prometheus metrics, made once per set of services and registered in the composition
 * root's registry, so /metrics shows them beside the HTTP figures.
 */
export class WebhookMetrics {
  readonly deliveries = new Counter({
    name: 'atrium_webhook_deliveries_total',
    help: 'Webhook deliveries that reached a final state, by outcome (delivered, failed)',
    labelNames: ['outcome'],
    registers: [],
  });
  readonly attempts = new Counter({
    name: 'atrium_webhook_attempts_total',
    help: 'Webhook delivery attempts by result (delivered, retry, failed)',
    labelNames: ['result'],
    registers: [],
  });
  readonly failures = new Counter({
    name: 'atrium_webhook_attempt_failures_total',
    help: 'Failed webhook attempts by reason (http_4xx, http_5xx, timeout, connection, refused, interrupted)',
    labelNames: ['reason'],
    registers: [],
  });
  readonly lag = new Histogram({
    name: 'atrium_webhook_outbox_lag_seconds',
    help: 'Time from an event being recorded to the first attempt of each of its deliveries',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [],
  });
  readonly duration = new Histogram({
    name: 'atrium_webhook_attempt_duration_seconds',
    help: 'Duration of webhook attempts, from request start to the end of the response',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [],
  });

  /**
   * Gauges read from the database at scrape time, so they are right whichever process delivers.
   * They are the only part of /metrics that needs the database, and a registry fails (or waits) as
   * a whole when one metric does: so their read gets BACKLOG_READ_BUDGET_MS, and when it fails or
   * takes longer their two series are left out of that scrape, and
   * `atrium_webhook_backlog_read_ok` says so, rather than the database taking every other figure
   * (`atrium_redis_up`, the 503 counters, `atrium_shared_state_degraded_total`) down with it during
   * an outage, when operators need them most. Left out rather than the last value kept: the age of
   * the oldest event grows while nothing can be read, so an old figure would be wrong, and a series
   * that is absent is not taken for a reading.
   */
  private backlogGauges(store: Store, logger: Pick<Logger, 'error'>) {
    const backlog = new BacklogRead(store, logger);
    const pending = new Gauge({
      name: 'atrium_webhook_pending_deliveries',
      help: `Webhook deliveries waiting for an attempt (any process); absent from a scrape whose read of the database failed or took over ${BACKLOG_READ_BUDGET_MS / 1000} s (atrium_webhook_backlog_read_ok 0)`,
      registers: [],
      async collect() {
        const read = await backlog.current();
        if (read) this.set(read.pending);
        else this.remove();
      },
    });
    const oldest = new Gauge({
      name: 'atrium_webhook_outbox_oldest_undispatched_seconds',
      help: `Age of the oldest event not yet fanned out to its endpoints (0 when none waits); absent from a scrape whose read of the database failed or took over ${BACKLOG_READ_BUDGET_MS / 1000} s (atrium_webhook_backlog_read_ok 0)`,
      registers: [],
      async collect() {
        const read = await backlog.current();
        if (read) this.set(read.oldestSeconds);
        else this.remove();
      },
    });
    const ok = new Gauge({
      name: 'atrium_webhook_backlog_read_ok',
      help: `Whether this scrape read the webhook backlog gauges from the database within ${BACKLOG_READ_BUDGET_MS / 1000} s (1) or not (0: the database failed or did not answer in time, and those gauges are absent)`,
      registers: [],
      async collect() {
        this.set((await backlog.current()) ? 1 : 0);
      },
    });
    return [pending, oldest, ok];
  }

  /** Registers every webhook metric in `registry` (the one /metrics serves). */
  adoptInto(registry: Registry, store: Store, logger: Pick<Logger, 'error'>): void {
    registry.registerMetric(this.deliveries);
    registry.registerMetric(this.attempts);
    registry.registerMetric(this.failures);
    registry.registerMetric(this.lag);
    registry.registerMetric(this.duration);
    for (const gauge of this.backlogGauges(store, logger)) registry.registerMetric(gauge);
  }
}

const perServices = new WeakMap<object, WebhookMetrics>();

/**
 * One set of webhook metrics per set of services (tests build many in one process), registered
 * once in the process's registry, the one /metrics serves.
 */
export function webhookMetricsFor(services: {
  metrics: Registry;
  store: Store;
  logger: Pick<Logger, 'error'>;
}): WebhookMetrics {
  let metrics = perServices.get(services);
  if (!metrics) {
    metrics = new WebhookMetrics();
    metrics.adoptInto(services.metrics, services.store, services.logger);
    perServices.set(services, metrics);
  }
  return metrics;
}
