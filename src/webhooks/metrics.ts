import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Store } from '../store/store.js';

/**
 * The worker's Prometheus metrics. Made once per set of services, registered in no registry of
 * their own: the HTTP app's /metrics registry adopts them (see `adoptWebhookMetrics`), so a process
 * serving both roles shows them beside the HTTP figures.
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

  /** Gauges read from the database at scrape time, so they are right whichever process delivers. */
  private backlogGauges(store: Store) {
    const pending = new Gauge({
      name: 'atrium_webhook_pending_deliveries',
      help: 'Webhook deliveries waiting for an attempt (any process)',
      registers: [],
      async collect() {
        const row = await store.db
          .selectFrom('webhook_deliveries')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', '=', 'pending')
          .executeTakeFirst();
        this.set(Number(row?.n ?? 0));
      },
    });
    const oldest = new Gauge({
      name: 'atrium_webhook_outbox_oldest_undispatched_seconds',
      help: 'Age of the oldest event not yet fanned out to its endpoints (0 when none waits)',
      registers: [],
      async collect() {
        const row = await store.db
          .selectFrom('events')
          .select((eb) => eb.fn.min('created_at').as('oldest'))
          .where('dispatched_at', 'is', null)
          .executeTakeFirst();
        const at = row?.oldest as string | null | undefined;
        this.set(at ? Math.max(0, (Date.now() - Date.parse(at)) / 1000) : 0);
      },
    });
    return [pending, oldest];
  }

  /** Registers every webhook metric in `registry` (the one /metrics serves). */
  adoptInto(registry: Registry, store: Store): void {
    registry.registerMetric(this.deliveries);
    registry.registerMetric(this.attempts);
    registry.registerMetric(this.failures);
    registry.registerMetric(this.lag);
    registry.registerMetric(this.duration);
    for (const gauge of this.backlogGauges(store)) registry.registerMetric(gauge);
  }
}

const perServices = new WeakMap<object, WebhookMetrics>();

/** One set of webhook metrics per set of services (tests build many in one process). */
export function webhookMetricsFor(services: object): WebhookMetrics {
  let metrics = perServices.get(services);
  if (!metrics) {
    metrics = new WebhookMetrics();
    perServices.set(services, metrics);
  }
  return metrics;
}
