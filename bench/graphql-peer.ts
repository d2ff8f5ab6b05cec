/**
 * The GraphQL peer of the benchmark: Mercurius with graphql-jit on Fastify, serving Atrium's own
 * executable schema (same resolvers, same per-request DataLoaders, same core) over the same
 * database, authenticating with the same Authenticator. What it lacks is Atrium's pipeline:
 * persisted queries, depth/complexity validation, the complexity budget, error masking. Like
 * Atrium it writes one access line per response (pino at info, same logger settings), so both pay
 * the same logging cost.
 */
import Fastify, { LogController } from 'fastify';
import mercurius from 'mercurius';
import { parseConfig } from '../src/config/schema.js';
import { createServices } from '../src/compose.js';
import { RequestScope, endRequestScope, enterRequestScope } from '../src/domain/request-scope.js';
import { createContext } from '../src/graphql/context.js';
import { buildAtriumSchema } from '../src/graphql/schema.js';
import { registerAccessLog } from '../src/http/plugins/access-log.js';
import { createLogger } from '../src/observability/logger.js';

const services = await createServices(
  parseConfig({ NODE_ENV: 'production', DATABASE_URL: process.env.DATABASE_URL!, LOG_LEVEL: 'silent' }),
  { migrate: false },
);
const logger = createLogger('info');
const app = Fastify({
  loggerInstance: logger,
  logController: new LogController({ disableRequestLogging: true }),
});
// Atrium's own access line, so both servers pay for the same log write per response.
registerAccessLog(app);
if (process.env.BENCH_PEER_REQUEST_SCOPE === '1') {
  // A diagnostic, not the reported peer: each request runs in a request scope (AsyncLocalStorage)
  // as Atrium's deadline runs a writing request (src/http/plugins/request-context.ts), ended when
  // its response closes, to measure what that scope costs per request apart from everything else
  // (bench/README.md). Atrium's queries no longer enter one.
  app.addHook('preHandler', (_request, reply, done) => {
    const scope = new RequestScope(new AbortController().signal);
    reply.raw.once('close', () => endRequestScope(scope));
    enterRequestScope(scope, done);
  });
}
await app.register(mercurius, {
  schema: buildAtriumSchema(),
  jit: 1,
  graphiql: false,
  context: async (req) => {
    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const principal = await services.authenticator.authenticate({
      authorization: header('authorization'),
      apiKey: header('x-api-key'),
    });
    return createContext(services, principal, String(req.id));
  },
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url: address })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
