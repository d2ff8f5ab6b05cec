import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '../../store/store.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The registry /metrics serves; surfaces and workers add their own metrics to it. */
    metricsRegistry: Registry;
  }
}

/**
 * Prometheus metrics of one HTTP app, in the process's registry (built by the composition root, so
 * jobs and other surfaces such as gRPC report there too) or a registry of its own (tests build many apps).
 */
export function registerMetrics(app: FastifyInstance, store: Store, registry = new Registry()): Registry {
  collectDefaultMetrics({ register: registry, prefix: 'atrium_' });
  app.decorate('metricsRegistry', registry);

  const requests = new Counter({
    name: 'atrium_http_requests_total',
    help: 'HTTP requests by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'atrium_http_request_duration_seconds',
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const pool = new Gauge({
    name: 'atrium_db_pool_connections',
    help: 'Database pool connections by state (PostgreSQL)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const stats = store.poolStats();
      if (!stats) return;
      this.set({ state: 'total' }, stats.total);
      this.set({ state: 'idle' }, stats.idle);
      this.set({ state: 'waiting' }, stats.waiting);
    },
  });
  void pool;

  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, never the raw URL, so ids do not explode the label set.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    done();
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return registry;
}
