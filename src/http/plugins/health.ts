import type { FastifyInstance } from 'fastify';
import { checkReadiness, type ReadinessCheck } from '../../process/readiness.js';

/** /healthz: the process lives. /readyz: every dependency (database, Redis) answers. */
export function registerHealth(
  app: FastifyInstance,
  checks: ReadinessCheck[],
  isDraining: () => boolean,
): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const { ready, checks: results } = await checkReadiness(checks, isDraining);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks: results });
  });
}
