import type { FastifyBaseLogger, FastifyInstance, RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * One access line per response, on the request's logger (its request id included). A callback
 * hook: no promise per request. A route with `config: { ownAccessLog: true }` whose handler calls
 * `writesOwnAccessLine` writes the line itself (/graphql/stream: a stream the client drops never
 * "finishes" for Fastify). The GraphQL benchmark's peer registers the same hook, so both
 * servers pay for the same line.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's handler may write the request's access line itself (see `writesOwnAccessLine`). */
    ownAccessLog?: boolean;
  }
}

const ownLines = new WeakSet<object>();

/**
 * Called by a handler of an `ownAccessLog` route that will write the request's `request` line
 * itself, however the response ends.
 */
export function writesOwnAccessLine(request: object): void {
  ownLines.add(request);
}

export function registerAccessLog<L extends FastifyBaseLogger>(
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, L>,
): void {
  app.addHook('onResponse', (request, reply, done) => {
    // A request whose handler writes its own line (a stream, whose end Fastify may not see) is not
    // logged twice; one refused before its handler ran (413, say) is logged here as any other.
    if (request.routeOptions.config.ownAccessLog && ownLines.has(request)) return done();
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url,
        ip: request.ip,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request',
    );
    done();
  });
}
