import { declareAllowed } from '../../http/app.js';
import { type OutgoingHttpHeaders, STATUS_CODES } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getOperationAST, GraphQLError } from 'graphql';
import { createHandler } from 'graphql-sse/lib/use/fastify';
import type { Services } from '../../compose.js';
import { headerValue } from '../../http/auth.js';
import { writesOwnAccessLine } from '../../http/plugins/access-log.js';
import {
  envelopedExecute,
  envelopedSubscribe,
  type GraphQLPipeline,
  unauthenticatedError,
} from '../pipeline/pipeline.js';
import { publicError, publicResult, requestErrorBody, UNSUPPORTED_MEDIA_TYPE } from './public-errors.js';
import { GRAPHQL_SSE_PATH } from '../paths.js';

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

/** What /graphql/stream serves; every Allow on it (405, plain OPTIONS) lists these. */
const SSE_ALLOW = declareAllowed(GRAPHQL_SSE_PATH, ['GET', 'POST']);

/**
 * A request the pipeline refused, answered before any stream opens (as graphql-sse answers its own
 * request errors): 400, or the error's own 4xx status, with `{ errors }`.
 */
function operationRefusal(errors: readonly GraphQLError[]) {
  const http = errors[0]?.extensions.http as
    { status?: number; headers?: Record<string, string> } | undefined;
  const status = http?.status !== undefined && http.status >= 400 ? http.status : 400;
  const body = JSON.stringify({ errors: errors.map(publicError) });
  const headers = { ...JSON_HEADERS, ...http?.headers };
  // The status's own reason phrase: graphql-sse's client puts it in the error it raises.
  return [body, { status, statusText: STATUS_CODES[status] ?? 'Error', headers }] as never;
}

/** A request refused as a whole, before graphql-sse sees it: `{ errors }` with a BAD_REQUEST code. */
function refuse(reply: FastifyReply, status: number, message: string, headers: Record<string, string> = {}) {
  // The reply's own headers (request id, security headers, CORS) as on every other answer: the
  // reply is hijacked, so Fastify does not write them.
  reply.raw.writeHead(status, { ...replyHeaders(reply), ...JSON_HEADERS, ...headers });
  reply.raw.end(requestErrorBody(message));
}

/** The headers set on the reply (a hijacked reply's are not written by Fastify), but its length. */
function replyHeaders(reply: FastifyReply): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined && name !== 'content-length') out[name] = value;
  }
  return out;
}

/** A body or parameter that is not JSON: Yoga's status, code and words for the same on /graphql. */
function invalidJson(reply: FastifyReply, message: string): void {
  refuse(reply, 400, message);
}

/** True when an Accept header (absent, or a list of media ranges) lets the answer be an event stream. */
function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((range) => {
    const [type = '', ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    const refused = params.some((p) => /^q=0(\.0*)?$/.test(p));
    return !refused && (type === 'text/event-stream' || type === 'text/*' || type === '*/*');
  });
}

/**
 * What the route refuses before graphql-sse sees the request. Atrium offers graphql-sse's distinct
 * connections mode only: one stream per operation, opened by GET or POST. Single connection mode's
 * reservations (PUT, then DELETE) are refused, and graphql-sse is told no request carries a stream
 * token (`authenticate` below): its fastify adapter reads a missing token header as the string
 * "undefined", so until 2026-11-28 one anonymous PUT reserved the stream "undefined", and the next
 * subscriber's request, from anyone, was attached to that empty reservation instead of running (and
 * every one after it was refused 409 while that request stayed open).
 */
function refusal(
  req: FastifyRequest,
): { status: number; message: string; headers?: Record<string, string> } | undefined {
  if (req.method !== 'GET' && req.method !== 'POST') {
    return {
      status: 405,
      message: `${GRAPHQL_SSE_PATH} takes GET or POST, one stream per operation; reservations (PUT, DELETE) are not offered.`,
      headers: { allow: SSE_ALLOW },
    };
  }
  if (!acceptsEventStream(req.headers.accept)) {
    return {
      status: 406,
      message: `${GRAPHQL_SSE_PATH} answers with an event stream: send Accept: text/event-stream.`,
    };
  }
  if (req.method === 'POST' && !req.headers['content-type']?.includes('application/json')) {
    return { status: 415, message: UNSUPPORTED_MEDIA_TYPE };
  }
  return undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What is wrong with the parameters' shapes, in Yoga's words for the same on /graphql; graphql-sse
 * would answer "Invalid variables" or "Missing query" with no code.
 */
function badParams(params: Record<string, unknown>): string | undefined {
  const { query, variables, extensions } = params;
  if (variables !== undefined && variables !== null && !isObject(variables))
    return `Expected "variables" param to be empty or an object, but given ${Array.isArray(variables) ? 'array' : typeof variables}.`;
  if (extensions !== undefined && extensions !== null && !isObject(extensions))
    return 'extensions must be a JSON object.';
  const hash = isObject(extensions) && isObject(extensions.persistedQuery);
  if (typeof query !== 'string' && !hash) return 'Send a query (or a persisted query hash).';
  return undefined;
}

type Parse = (text: string) => unknown;

/**
 * JSON.parse for one request, each text parsed once however many of the checks below read it (a
 * text that is not JSON throws its SyntaxError again each time). A POST body's parsed object is
 * then handed to graphql-sse too (`registerSse`), so the body is parsed once per operation; until
 * 2026-11-28 it was parsed three times (`unparsable`, `paramsOf`, graphql-sse). GET's `variables`
 * and `extensions` are parsed here once and by graphql-sse once more: it reads them from the URL.
 */
function parseOnce(): Parse {
  const parsed = new Map<string, { value: unknown } | { error: unknown }>();
  return (text) => {
    let outcome = parsed.get(text);
    if (outcome === undefined) {
      try {
        outcome = { value: JSON.parse(text) as unknown };
      } catch (error) {
        outcome = { error };
      }
      parsed.set(text, outcome);
    }
    if ('error' in outcome) throw outcome.error;
    return outcome.value;
  };
}

/**
 * The request's parameters as graphql-sse reads them, or undefined when they are not JSON (which
 * `unparsable` or graphql-sse itself answers). For a POST, the parsed body itself.
 */
function paramsOf(req: FastifyRequest, parse: Parse): Record<string, unknown> | undefined {
  try {
    if (req.method === 'GET') {
      const out: Record<string, unknown> = {};
      for (const [name, value] of new URLSearchParams(req.url.split('?')[1] ?? '')) {
        out[name] = name === 'variables' || name === 'extensions' ? parse(value) : value;
      }
      return out;
    }
    if (typeof req.body !== 'string') return undefined;
    const parsed = parse(req.body);
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** What of the request is not JSON, in Yoga's words, or undefined when all of it parses. */
function unparsable(req: FastifyRequest, parse: Parse): string | undefined {
  const parses = (text: string) => {
    try {
      parse(text);
      return true;
    } catch {
      return false;
    }
  };
  if (req.method === 'GET') {
    const search = new URLSearchParams(req.url.split('?')[1] ?? '');
    for (const name of ['variables', 'extensions']) {
      const value = search.get(name);
      if (value && !parses(value)) return `The ${name} parameter is not valid JSON.`;
    }
    return undefined;
  }
  const json = req.headers['content-type']?.includes('application/json');
  // An empty JSON POST is not JSON either, as POST /graphql answers it. It must be answered here:
  // its body is undefined (see the handler), and graphql-sse would wait for the request's stream,
  // which Fastify has read to its end already; the route has no deadline, so until 2026-11-28 such
  // a request was never answered and stayed open until shutdown.
  const text = typeof req.body === 'string' ? req.body : req.method === 'POST' ? '' : undefined;
  if (json && text !== undefined && !parses(text)) return 'POST body sent invalid JSON.';
  return undefined;
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
    // No request carries a single-connection-mode stream token (see `refusal`).
    authenticate: () => null,
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
        principal = await pipeline.authenticate(credentials, { requestId: request.id });
      } catch (err) {
        // The same error POST and GET answer: 401 with WWW-Authenticate.
        const refused = err instanceof GraphQLError ? err : unauthenticatedError(err);
        pipeline.observer.rejected('sse', request.id, params.operationName, [refused]);
        return operationRefusal([refused]);
      }
      const prepared = await pipeline.prepare(params, {
        transport: 'sse',
        principal,
        credentials,
        address: request.ip,
        requestId: request.id,
      });
      if ('errors' in prepared) return operationRefusal(prepared.errors);
      const { document, operationName } = prepared.args;
      if (request.method === 'GET' && getOperationAST(document, operationName)?.operation === 'mutation') {
        // graphql-sse would refuse it too, but without a code: Yoga's error for the same on GET /graphql.
        const refused = new GraphQLError('Can only perform a mutation operation from a POST request.', {
          extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'POST' } } },
        });
        pipeline.observer.rejected('sse', request.id, params.operationName, [refused]);
        return operationRefusal([refused]);
      }
      return prepared.args as never;
    },
    // Results without Yoga's HTTP instructions (`extensions.http`), as over WebSocket.
    onNext: (_ctx, _req, result) => publicResult(result as never) as never,
  });

  app.route({
    url: GRAPHQL_SSE_PATH,
    method: ['GET', 'POST', 'PUT', 'DELETE'],
    schema: { hide: true },
    // A stream lives as long as its subscription: the 30 s request deadline does not apply.
    // The access line is written below once the stream ends, however it ends (a stream the client
    // drops never "finishes" for Fastify's onResponse): the global access log leaves it out.
    config: { noTimeout: true, ownAccessLog: true },
    handler: async (req, reply) => {
      writesOwnAccessLine(req);
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
        const refused = refusal(req);
        if (refused) return refuse(reply, refused.status, refused.message, refused.headers);
        // graphql-sse takes the distinct connections mode only for exactly this header.
        req.headers.accept = 'text/event-stream';
        // graphql-sse answers JSON it cannot parse with the parser's own words and no code.
        const parse = parseOnce();
        const badJson = unparsable(req, parse);
        const params = badJson === undefined ? paramsOf(req, parse) : undefined;
        const bad = badJson ?? (params && badParams(params));
        if (bad) invalidJson(reply, bad);
        else {
          // A body already parsed (an object) is what graphql-sse takes as is, as from a body parser;
          // anything else it is left to parse, and to answer, itself.
          if (req.method === 'POST' && params) (req as { body: unknown }).body = params;
          await handler(req, reply);
        }
      } catch (err) {
        if (reply.raw.writableEnded) return;
        services.logger.error({ err, reqId: req.id }, 'graphql-sse failed');
        const body = JSON.stringify({
          errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
        });
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { ...replyHeaders(reply), ...JSON_HEADERS });
        }
        reply.raw.end(body);
      } finally {
        open.delete(reply);
        req.log.info(
          {
            method: req.method,
            route: GRAPHQL_SSE_PATH,
            ip: req.ip,
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
