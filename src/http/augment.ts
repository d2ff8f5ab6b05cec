// Brings @fastify/swagger's route-schema fields (hide, tags, summary, security) into scope for every route file.
import type {} from '@fastify/swagger';
import type { Registry } from 'prom-client';

declare module 'fastify' {
  interface FastifyInstance {
    /** The Prometheus registry /metrics serves (src/http/plugins/metrics.ts). */
    metricsRegistry: Registry;
  }
}
