import type { Services } from '../compose.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import type { Resolver } from './address-policy.js';
import { WebhookDeliveries } from './deliveries.js';
import { WebhookEndpoints } from './endpoints.js';
import { webhookMetricsFor } from './metrics.js';
import { listenForOutbox } from './wakeup.js';
import { WebhookWorker, type WorkerOptions } from './worker.js';

export interface Webhooks {
  endpoints: WebhookEndpoints;
  deliveries: WebhookDeliveries;
}

const built = new WeakMap<Services, Webhooks>();

/**
 * The webhook core of one set of services, made on first use and shared by the REST routes, the
 * CLI and the worker, so every surface applies the same rules.
 */
export function webhooksOf(services: Services): Webhooks {
  let w = built.get(services);
  if (!w) {
    const endpoints = new WebhookEndpoints(services.deps, {
      allowPrivate: services.config.webhookAllowPrivate,
    });
    w = { endpoints, deliveries: new WebhookDeliveries(services.deps, endpoints) };
    built.set(services, w);
  }
  return w;
}

/**
 * Starts the delivery worker of the `worker` role and registers its stop with the services'
 * closers, so `close()` lets attempts in flight finish and records them before the store closes.
 */
export async function startWebhookWorker(
  services: Services,
  overrides: Partial<Pick<WorkerOptions, 'concurrency' | 'pollMs' | 'retentionMs'>> & {
    resolve?: Resolver;
  } = {},
): Promise<WebhookWorker> {
  const { config } = services;
  const worker = new WebhookWorker({
    store: services.store,
    bus: services.bus,
    clock: services.clock,
    logger: services.logger,
    metrics: webhookMetricsFor(services),
    timeoutMs: config.webhookTimeoutMs,
    backoffBaseMs: config.webhookBackoffBaseMs,
    allowPrivate: config.webhookAllowPrivate,
    ...(services.store.dialect === 'postgres'
      ? {
          listen: (wake: () => void, outage: StoreOutageLog) =>
            listenForOutbox(config.databaseUrl, wake, services.logger, outage),
        }
      : {}),
    ...overrides,
  });
  await worker.start();
  // Winding down starts with the drain, so the cut of attempts in flight counts from the signal.
  services.onDrain.push(() => void worker.stop().catch(() => undefined));
  services.onClose.push(() => worker.stop());
  return worker;
}
