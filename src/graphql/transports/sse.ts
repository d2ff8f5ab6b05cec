import type { FastifyInstance, FastifyReply } from 'fastify';
import type { GraphQLError } from 'graphql';
import { createHandler } from 'graphql-sse/lib/use/fastify';
import type { Services } from '../../compose.js';
import { headerValue } from '../../http/auth.js';
import { envelopedExecute, envelopedSubscribe, type GraphQLPipeline } from '../pipeline/pipeline.js';

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

/** An error as the client sees it: Yoga's internal `http` extension stays on the server. */
function publicError(error: GraphQLError) {
  const { http: _http, ...extensions } = error.extensions as Record<string, unknown>;
  return { ...error.toJSON(), extensions };
}

/**
 * A request the pipeline refused, answered before any stream opens (as graphql-sse answers its own
 * request errors): 400, or the error's own 4xx status, with `{ errors }`.
 */
function refusal(errors: readonly GraphQLError[]) {
  const http = errors[0]?.extensions.http as { status?: number } | undefined;
  const status = http?.status !== undefined && http.status >= 400 ? http.status : 400;
  const body = JSON.stringify({ errors: errors.map(publicError) });
  return [
    body,
    { status, statusText: status === 400 ? 'Bad Request' : 'Refused', headers: JSON_HEADERS },
  ] as never;
}

/**
 * graphql-sse at /graphql/stream ("distinct connections" mode: one stream per operation, by GET or
 * POST). Credentials are the usual headers, checked by the shared Authenticator (bad ones: 401);
 * every operation goes through the pipeline's prepare() and the enveloped execute/subscribe.
 */
export function registerSse(
  app: FastifyInstance,
  services: Services,
  pipeline: GraphQLPipeline,
): { close(): Promise<void> } {
  const open = new Set<FastifyReply>();
  const handler = createHandler({
    execute: envelopedExecute as never,
    subscribe: envelopedSubscribe as never,
    onSubscribe: async (req, params) => {
      const request = req.raw;
      let principal;
      const credentials = {
        authorization: headerValue(request, 'authorization'),
        apiKey: headerValue(request, 'x-api-key'),
      };
      try {
        principal = await pipeline.authenticate(credentials);
      } catch (err) {
        pipeline.observer.rejected('sse', request.id, params.operationName, [err as GraphQLError]);
        const body = JSON.stringify({
          errors: [{ message: (err as Error).message, extensions: { code: 'UNAUTHENTICATED' } }],
        });
        const init = {
          status: 401,
          statusText: 'Unauthorized',
          headers: { 'content-type': 'application/json; charset=utf-8' },
        };
        return [body, init] as never;
      }
      const prepared = await pipeline.prepare(params, {
        transport: 'sse',
        principal,
        credentials,
        address: request.ip,
        requestId: request.id,
      });
      if ('errors' in prepared) return refusal(prepared.errors);
      return prepared.args as never;
    },
  });

  app.route({
    url: '/graphql/stream',
    method: ['GET', 'POST', 'PUT', 'DELETE'],
    schema: { hide: true },
    // A stream lives as long as its subscription: the 30 s request deadline does not apply.
    config: { noTimeout: true },
    handler: async (req, reply) => {
      // The scope hands bodies over unparsed (a Buffer): graphql-sse reads a string and parses it.
      if (Buffer.isBuffer(req.body))
        (req as { body: unknown }).body = req.body.length ? req.body.toString('utf8') : undefined;
      reply.hijack();
      // A stream ended by shutdown or by the client may still be written to once by graphql-sse;
      // that write fails on the response, and must not become the process's uncaught error.
      reply.raw.on('error', (err) => req.log.debug({ err: err.message }, 'graphql-sse stream error'));
      open.add(reply);
      const started = process.hrtime.bigint();
      try {
        await handler(req, reply);
      } catch (err) {
        if (reply.raw.writableEnded) return;
        services.logger.error({ err, reqId: req.id }, 'graphql-sse failed');
        if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(
          JSON.stringify({
            errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
          }),
        );
      } finally {
        open.delete(reply);
        req.log.info(
          {
            method: req.method,
            route: '/graphql/stream',
            status: reply.raw.statusCode,
            ms: Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10,
          },
          'request',
        );
      }
    },
  });

  return {
    /** Shutdown: every open stream is ended; the handler then completes its subscription. */
    async close() {
      for (const reply of open) reply.raw.end();
    },
  };
}
