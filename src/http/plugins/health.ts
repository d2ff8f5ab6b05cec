import type { FastifyInstance } from 'fastify';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
  /** The process roles that depend on it; absent: every role does (the database). */
  roles?: readonly ('api' | 'auth' | 'grpc' | 'worker')[];
}

/** /healthz: the process lives. /readyz: every dependency (database, Redis) answers. */
export function registerHealth(
  app: FastifyInstance,
  checks: ReadinessCheck[],
  isDraining: () => boolean,
): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const results: Record<string, string> = {};
    let ready = !isDraining();
    await Promise.all(
      checks.map(async (c) => {
        try {
          await withTimeout(c.check(), 2000);
          results[c.name] = 'ok';
        } catch {
          results[c.name] = 'unavailable';
          ready = false;
        }
      }),
    );
    if (isDraining()) results.process = 'draining';
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks: results });
  });
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}
