import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../compose.js';
import type { DomainError } from '../domain/errors.js';
import { decodeUtf8, foreignCharset, isJsonMediaType } from '../http/body-text.js';
import { sendError } from '../http/errors.js';
import type { RouteModule } from '../http/routes.js';
import { graphQLErrorBody } from './errors.js';
import { createPersistedQueries } from './pipeline/persisted.js';
import { enterRequestScope } from '../domain/request-scope.js';
import { requestScopeOf } from '../http/plugins/request-context.js';
import { createPipeline, type GraphQLPipeline, type HttpServerContext } from './pipeline/pipeline.js';
import { buildAtriumSchema } from './schema.js';
import { CommentFeed } from './subscriptions/comment-feed.js';
import { graphqlCacheHeaders } from './transports/cache-headers.js';
import { directPost } from './transports/direct-post.js';
import { requestErrorBody, UNSUPPORTED_MEDIA_TYPE } from './transports/public-errors.js';
import { registerSse } from './transports/sse.js';
import { attachWebSocket } from './transports/websocket.js';
import { GRAPHQL_PATH } from './paths.js';

/**
 * GraphQL at /graphql: POST and GET through Yoga (the common JSON POST directly, through the same
 * plugins: ./transports/direct-post.ts), graphql-ws on the same path, graphql-sse at
 * /graphql/stream. All four call the one pipeline (src/graphql/pipeline): authenticate, persisted
 * query, parse (cached), validate with the limits, budget, context, execute or subscribe.
 */
async function registerGraphQL(app: FastifyInstance, services: Services): Promise<void> {
  const schema = buildAtriumSchema();
  const persisted = await createPersistedQueries(services.store, services.clock, {
    file: services.config.persistedQueriesFile,
    registration: services.config.nodeEnv !== 'production',
    schema,
  });
  const commentFeed = new CommentFeed(services);
  await commentFeed.start();
  const pipeline = createPipeline(services, schema, persisted, commentFeed);
  const direct = directPost(pipeline);

  await app.register(async (scope) => {
    // Yoga and graphql-sse read the body themselves (JSON, GraphQL errors for bad JSON); the
    // scope only collects it, so the body limit (413) still applies.
    scope.removeAllContentTypeParsers();
    // A body Yoga or graphql-sse reads as text is refused here when it is not UTF-8 (they would
    // decode it with U+FFFD in place of each bad byte), and a JSON body naming another charset is
    // 415: JSON is UTF-8 (RFC 8259). Both answer in GraphQL's shape through the handler below.
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
      const refused = textBodyRefusal(req.headers['content-type'], body as Buffer);
      done(refused ?? null, body);
    });
    // What reaches Fastify's error handler here (the 413) answers as a GraphQL error, not REST's body.
    scope.setErrorHandler((err, request, reply) =>
      sendError(request, reply, err, undefined, graphQLErrorBody),
    );

    scope.route({
      url: GRAPHQL_PATH,
      method: ['GET', 'POST', 'OPTIONS'],
      schema: { hide: true },
      // Queries read outside the request scope; a mutation runs inside it (the direct path enters
      // it for mutations only, Yoga's path for every POST: GET cannot carry a mutation).
      // The deadline's 503 answers in GraphQL's shape, as the error handler above does.
      config: { scopeInHandler: true, errorShape: graphQLErrorBody },
      // Cache-Control and Vary on every JSON answer, whichever path built it (docs/graphql.md).
      onSend: graphqlCacheHeaders,
      handler: async (req, reply) => {
        if (req.method === 'POST' && (await direct(req, reply))) return reply;
        const scope = req.method === 'POST' ? requestScopeOf(req) : undefined;
        return scope
          ? enterRequestScope(scope, () => viaYoga(pipeline, req, reply))
          : viaYoga(pipeline, req, reply);
      },
    });
    const sse = registerSse(scope, services, pipeline);
    const ws = attachWebSocket(app, services, pipeline, { keepAliveMs: services.wsKeepAliveMs });
    // Before the server stops accepting: open sockets and streams would otherwise hold it open.
    app.addHook('preClose', async () => {
      await commentFeed.close();
      await Promise.all([ws.close(), sse.close()]);
    });
  });
}

/** Everything but the direct path: Yoga answers, and its Response becomes the reply. */
async function viaYoga(pipeline: GraphQLPipeline, req: FastifyRequest, reply: FastifyReply) {
  // An empty POST body reaches Yoga as an empty stream: Yoga reads an empty or absent body
  // from the request stream, which Fastify has already read to its end, and would wait on it.
  if (req.method === 'POST' && !(req.body as Buffer | undefined)?.length) req.body = Readable.from([]);
  const context: HttpServerContext = { req, reply };
  const response = await pipeline.yoga.handleNodeRequestAndResponse(req, reply, context);
  // Past the deadline the request was answered 503 meanwhile: this late answer then goes nowhere,
  // quietly (request-context.ts, dropLateAnswers).
  response.headers.forEach((value, key) => void reply.header(key, value));
  reply.status(response.status);
  // Yoga answers a body it cannot read (text/plain, XML, no content type) with 415 and no error:
  // the same refusal as every other request error, in GraphQL's error shape.
  if (response.status === 415) {
    reply.header('content-type', 'application/json; charset=utf-8');
    return reply.send(requestErrorBody(UNSUPPORTED_MEDIA_TYPE));
  }
  // A JSON answer is already one string inside the Response: sending it as such spares the
  // stream pipe (a Readable, its listeners and a chunked write) on every request. Event
  // streams and multipart answers stay streamed.
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('json') || type.startsWith('text/html')) reply.send(await response.text());
  else reply.send(response.body);
  return reply;
}

export const graphqlModule: RouteModule = { name: 'graphql', roles: ['api'], register: registerGraphQL };

/** Media types whose bodies Yoga or graphql-sse read as text (multipart uploads stay bytes). */
const TEXT_BODY = /^application\/(x-www-form-urlencoded|graphql)$/;

/** Why a /graphql or /graphql/stream body is refused before anything reads it, if it is. */
function textBodyRefusal(contentType: string | undefined, body: Buffer): DomainError | undefined {
  const json = isJsonMediaType(contentType);
  if (!json && !TEXT_BODY.test(contentType?.split(';')[0]?.trim().toLowerCase() ?? '')) return undefined;
  if (json) {
    const charset = foreignCharset(contentType);
    if (charset) return charset;
  }
  try {
    decodeUtf8(body);
  } catch (err) {
    return err as DomainError;
  }
  return undefined;
}
