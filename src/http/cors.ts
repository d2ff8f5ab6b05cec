import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../compose.js';
import { DomainError } from '../domain/errors.js';
import { sendError } from './errors.js';
import type { RouteModule } from './routes.js';

export const CORS_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/**
 * Every request header the service reads: the conditional ones (a page makes conditional reads and
 * writes of an order, docs/rest.md) and X-Request-Id, which a caller may set to follow its request
 * through the logs; then headers that popular clients add on their own and the service ignores:
 * Apollo Client's name and version (`new ApolloClient({ name, version })`) and W3C Trace Context
 * (tracing SDKs such as OpenTelemetry's). One the preflight leaves out makes the browser refuse the
 * call itself, with nothing for the page to read but "Failed to fetch".
 */
export const CORS_ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'X-API-Key',
  'Idempotency-Key',
  'If-Match',
  'If-Unmodified-Since',
  'If-None-Match',
  'If-Modified-Since',
  'X-Request-Id',
  'Apollographql-Client-Name',
  'Apollographql-Client-Version',
  'Traceparent',
  'Tracestate',
];
/** Response headers a browser script may read beyond the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'Retry-After',
  'ETag',
  'Location',
  'Idempotent-Replayed',
  'X-Request-Id',
  'Deprecation',
  'Sunset',
  'Link',
  'X-Cache',
  'WWW-Authenticate',
];
export const CORS_MAX_AGE_SECONDS = 86_400;

/**
 * The headers @fastify/cors gives an answer that is not a preflight, for an answer sent where its
 * hook never runs (a URL the router refuses): the origin echoed when listed, nothing else when not.
 */
export function crossOriginHeaders(
  origin: string | undefined,
  allowedOrigins: readonly string[],
): Record<string, string> {
  if (origin === undefined || !allowedOrigins.includes(origin)) return { vary: 'Origin' };
  return {
    vary: 'Origin',
    'access-control-allow-origin': origin,
    'access-control-allow-credentials': 'true',
    'access-control-expose-headers': CORS_EXPOSED_HEADERS.join(', '),
  };
}

/**
 * Cross-origin access for the exact origins of CORS_ORIGINS and no others. The allowed origin is
 * echoed back (never `*`), so sending credentials is safe to allow; requests from other origins are
 * still served (servers and curl send Origin too) but without CORS headers, so browsers hide them.
 */
export async function registerCors(app: FastifyInstance, allowedOrigins: readonly string[]): Promise<void> {
  const allowed = new Set(allowedOrigins);
  const isAllowed = (origin: string | undefined): origin is string =>
    origin !== undefined && allowed.has(origin);

  // A preflight from an origin not on the list gets a clear refusal instead of a bare 404.
  // Callback style so the requests it does not concern (all but OPTIONS) pay no promise for it.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method !== 'OPTIONS') return done();
    const origin = request.headers.origin;
    if (origin === undefined || request.headers['access-control-request-method'] === undefined) return done();
    if (isAllowed(origin)) return done();
    reply.header('vary', 'Origin');
    sendError(
      request,
      reply,
      new DomainError('forbidden', `Cross-origin requests from ${origin} are not allowed.`),
    );
    // Like the async hook resolving after the refusal: Fastify runs no later step for a sent reply.
    done();
  });

  await app.register(cors, {
    origin: (origin, callback) => callback(null, isAllowed(origin) ? origin : false),
    credentials: true,
    methods: CORS_METHODS,
    allowedHeaders: CORS_ALLOWED_HEADERS,
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: CORS_MAX_AGE_SECONDS,
    // A plain OPTIONS from an allowed origin answers like a preflight rather than with a text/plain 400.
    strictPreflight: false,
  });
}

export const corsModule: RouteModule = {
  name: 'cors',
  roles: ['api', 'auth'],
  register: (app: FastifyInstance, services: Services) => registerCors(app, services.config.corsOrigins),
};
