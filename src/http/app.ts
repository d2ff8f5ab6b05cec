import type { IncomingMessage, Server } from 'node:http';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  LogController,
  type onSendHookHandler,
} from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from '../config/schema.js';
import { DomainError } from '../domain/errors.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import type { Store } from '../store/store.js';
import { answerUnmetExpectations, clientErrorHandler, continueWhenBodyIsRead } from './client-errors.js';
import { authStepTooLate } from './docs/security.js';
import { refuseEncodedBodies } from './content-encoding.js';
import { crossOriginHeaders } from './cors.js';
import { sendError } from './errors.js';
import { v1DeprecationHeaders } from './rest/orders/deprecation.js';
import { keepAliveAfterRefusedBody } from './refused-body.js';
import { UpgradeAwareMessage } from './upgrades.js';
import { registerAccessLog } from './plugins/access-log.js';
import type { ReadinessCheck } from '../process/readiness.js';
import { registerHealth } from './plugins/health.js';
import { registerMetrics } from './plugins/metrics.js';
import { genRequestId, requestContext, SECURITY_HEADERS } from './plugins/request-context.js';
import { acceptEmptyJsonBodies, validatorCompiler } from './validation.js';
import './augment.js';

export interface HttpAppOptions {
  config: Config;
  logger: Logger;
  store: Store;
  /** The process's database outage log (`Services.storeOutage`), which every HTTP surface shares. */
  storeOutage: StoreOutageLog;
  readiness: ReadinessCheck[];
  isDraining: () => boolean;
  /** True once the drain wants every answer to end its connection (src/http/drain.ts). */
  closesConnections?: () => boolean;
  /** The process's metrics registry, served at /metrics. */
  metrics?: Registry;
}

/**
 * TRUST_PROXY as Fastify takes it. A hop count becomes a function (Fastify's own numeric option
 * now trusts nothing): the first `n` hops from the socket are believed, as proxy-addr counts them.
 * A count cannot tell a proxy from a direct client, so it suits servers reachable only through the
 * proxy; a list of addresses is the safe choice anywhere else.
 */
/**
 * 204 and 304 have no content (RFC 9110 §6.4.1, §15.3.5, §15.4.5): whatever a handler passed
 * (`send(null)` is serialised to `null`) is dropped with its Content-Type, and no Content-Length
 * is sent, so a 304 carries its validators and nothing else. For HEAD, Fastify's own last onSend
 * step drops the payload and writes a Content-Length; `noContentAfterHead` runs after it.
 */
const noContent: onSendHookHandler = (request, reply, payload, done) => {
  if (reply.statusCode !== 204 && reply.statusCode !== 304) return done(null, payload);
  reply.removeHeader('content-type');
  reply.removeHeader('content-length');
  done(null, request.method === 'HEAD' ? payload : null);
};

const noContentAfterHead: onSendHookHandler = (_request, reply, payload, done) => {
  if (reply.statusCode === 204 || reply.statusCode === 304) reply.removeHeader('content-length');
  done(null, payload);
};

/** Why the request's Host does not do (RFC 9112 §3.2), or undefined when it does. */
function hostHeaderProblem(raw: IncomingMessage): string | undefined {
  let hosts = 0;
  for (let i = 0; i < raw.rawHeaders.length; i += 2) {
    if (raw.rawHeaders[i]!.toLowerCase() === 'host') hosts += 1;
  }
  if (hosts > 1) return 'The request has more than one Host header.';
  if (hosts === 0 && raw.httpVersion === '1.1') return 'An HTTP/1.1 request needs a Host header.';
  return undefined;
}

function badHost(message: string): DomainError {
  return new DomainError('validation_error', 'The request is malformed.', [
    { field: null, message, code: 'malformed_request' },
  ]);
}

/** Methods a route can be declared for; OPTIONS is left out, CORS answers it on every path. */
const ROUTE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Paths whose route is declared for more methods than it serves (/graphql/stream refuses PUT and
 * DELETE itself): the methods that really work, so every Allow on the path says the same.
 */
const servedMethods = new Map<string, readonly string[]>();

export function declareAllowed(path: string, methods: readonly string[]): string {
  servedMethods.set(path, methods);
  return methods.join(', ');
}

/** The methods the router has a route for at this URL (a concrete path, as requested). */
export function allowedMethods(app: FastifyInstance, url: string): string[] {
  const path = url.split('?', 1)[0]!;
  const served = servedMethods.get(path);
  if (served) return [...served];
  return ROUTE_METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
}

function methodNotAllowed(method: string, allow: string[]): DomainError {
  const list = allow.join(', ');
  return new DomainError('validation_error', `${method} is not allowed here; this path allows ${list}.`, [], {
    status: 405,
    error: 'method_not_allowed',
    headers: { allow: list },
  });
}

export function trustProxyOption(
  trust: Config['trustProxy'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return trust;
}

/**
 * The HTTP skeleton every HTTP surface shares: request ids, security headers, the deadline, error
 * shape, health and metrics. Surfaces (REST, token server, docs, GraphQL) register on top of it.
 */
export function createHttpApp(options: HttpAppOptions): FastifyInstance {
  const { config } = options;
  const app = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    genReqId: genRequestId,
    // One access line per response (below) instead of Fastify's two per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.bodyLimitBytes,
    // Only TRUST_PROXY's proxies may name the client in X-Forwarded-For; request.ip is then the
    // real client for the per-address limits and the access log, and a forged header from any
    // other peer changes nothing.
    trustProxy: trustProxyOption(config.trustProxy),
    // A request that reaches a draining instance on a connection that is still open is served (its
    // answer closes the connection), not refused: behind nginx a refused POST would be lost.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Node's request class, whose `upgrade` says which upgrades a surface takes (upgrades.ts).
    // Node's own answer to a missing Host is a bare 400; the hook below answers it in the spec's shape.
    http: { IncomingMessage: UpgradeAwareMessage, requireHostHeader: false },
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    ajv: { customOptions: { allErrors: true } },
    // Requests Node's parser refuses before routing: the spec's shape, headers, Connection: close.
    clientErrorHandler: clientErrorHandler(() => options.logger as FastifyBaseLogger),
    // Errors the router raises before any hook runs (bad URL encoding, over-long path segments)
    // still get the spec's body, the request id and the security headers.
    frameworkErrors: (err, request, reply) => {
      reply.header('x-request-id', request.id).headers(SECURITY_HEADERS);
      // No hook runs for such a request: the CORS and v1 deprecation headers are set here.
      reply.headers(crossOriginHeaders(request.headers.origin, config.corsOrigins));
      const deprecation = v1DeprecationHeaders(request.url, config.v1Sunset);
      if (deprecation) reply.headers(deprecation);
      sendError(request, reply, err);
    },
  });
  answerUnmetExpectations(app.server as Server);
  continueWhenBodyIsRead(app.server as Server);
  // A request whose Upgrade was ignored is answered and its connection closed: Node's parser stops
  // at the end of such a request, so requests pipelined behind it would never be answered.
  app.addHook('onRequest', (request, reply, done) => {
    if ((request.raw as UpgradeAwareMessage).upgradeIgnored) reply.raw.shouldKeepAlive = false;
    // An HTTP/1.1 request needs exactly one Host (RFC 9112 §3.2): none, or two, is 400 in the
    // spec's shape, and the connection is closed, as for what Node's parser refuses.
    const hostProblem = hostHeaderProblem(request.raw);
    if (hostProblem) {
      reply.raw.shouldKeepAlive = false;
      reply.header('x-request-id', request.id).headers(SECURITY_HEADERS).header('connection', 'close');
      sendError(request, reply, badHost(hostProblem));
      return;
    }
    done();
  });
  app.decorate('errorDialects', []);
  app.decorate('storeOutage', options.storeOutage);
  // Credentials first, on every route: the caller step may only run on request.
  app.addHook('onRoute', (route) => {
    const hook = authStepTooLate(route as unknown as Record<string, unknown>);
    if (hook) {
      throw new Error(
        `${String(route.method)} ${route.url} checks credentials in ${hook}; use onRequest so they come before the body`,
      );
    }
  });
  // Fastify's automatic HEAD route sets Content-Length in an onSend step of its own, after every
  // other, so a step of its own goes after that one.
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD') return;
    const own = route.onSend === undefined ? [] : Array.isArray(route.onSend) ? route.onSend : [route.onSend];
    route.onSend = [...own, noContentAfterHead];
  });
  app.addHook('onSend', noContent);
  app.setValidatorCompiler(validatorCompiler());
  acceptEmptyJsonBodies(app);
  refuseEncodedBodies(app);
  // No route reads text: a JSON route given text/plain is 415 (docs/rest.md), and the token
  // server's forms are application/x-www-form-urlencoded only (RFC 6749), never text/plain.
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('principal', null);
  app.decorateRequest('users', null);

  requestContext(app, config.requestTimeoutMs);
  app.setErrorHandler((err, request, reply) => sendError(request, reply, err));
  app.setNotFoundHandler((request, reply) => {
    // A path the router knows under other methods is 405 with Allow (RFC 9110 §15.5.6), not 404.
    // A route that has this method and still calls callNotFound (a missing file under a static
    // wildcard such as /docs/static/*) found no resource: that is a 404.
    const allow = allowedMethods(app, request.raw.url ?? request.url);
    // A plain OPTIONS (no CORS preflight: that is answered before routing) asks what the resource
    // supports (RFC 9110 §9.3.7): the answer is Allow, not a refusal.
    if (allow.length > 0 && request.method === 'OPTIONS') {
      return reply
        .code(204)
        .header('allow', [...allow, 'OPTIONS'].join(', '))
        .send();
    }
    if (allow.length > 0 && !allow.includes(request.method)) {
      return sendError(request, reply, methodNotAllowed(request.method, allow));
    }
    return sendError(request, reply, Object.assign(new Error('No such route.'), { statusCode: 404 }));
  });
  registerAccessLog(app);
  // Once the drain stops accepting, every answer closes its connection, so a balancer's kept-alive
  // connections end after a response instead of being cut under a request it just sent. Otherwise
  // a 413 keeps its connection while the refused body is still arriving (refused-body.ts).
  app.addHook('onSend', (request, reply, payload, done) => {
    if (options.closesConnections?.()) reply.header('connection', 'close');
    else keepAliveAfterRefusedBody(request, reply, config.bodyLimitBytes);
    done(null, payload);
  });
  registerHealth(app, options.readiness, options.isDraining);
  registerMetrics(app, options.store, options.metrics);
  return app;
}
