import { Counter, Gauge } from 'prom-client';
import type { RouteModule } from '../http/routes.js';

/**
 * Figures every role's /metrics carries about the parts it shares with other instances:
 * whether Redis answers, and how many requests went ahead without it (fail-open decisions).
 */
export const sharedStateMetricsModule: RouteModule = {
  name: 'shared-state-metrics',
  roles: ['api', 'auth', 'grpc', 'worker'],
  register(_app, services) {
    const health = services.sharedHealth;
    // Without Redis there is nothing to be up or down; prom-client would show an unset gauge as 0.
    if (health.configured)
      new Gauge({
        name: 'atrium_redis_up',
        help: 'Whether the Redis connection is ready and Redis answers (1) or not (0); absent without REDIS_URL',
        registers: [services.metrics],
        collect() {
          this.set(health.up ? 1 : 0);
        },
      });
    new Counter({
      name: 'atrium_shared_state_degraded_total',
      help: 'Requests served without Redis, by component (rate_limiter: not limited; brute_force_client, brute_force_login: failures not counted; user_cache: read from the database; complexity_budget: GraphQL operations not limited; broadcast: comment events not broadcast)',
      labelNames: ['component'],
      registers: [services.metrics],
      collect() {
        this.reset();
        for (const [component, n] of health.degradedCounts()) this.inc({ component }, n);
      },
    });
  },
};
