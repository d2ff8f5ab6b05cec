import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { useServer } from 'graphql-ws/use/ws';
import { GraphQLError } from 'graphql';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Credentials } from '../../auth/authenticator.js';
import type { Principal } from '../../auth/principal.js';
import type { Services } from '../../compose.js';
import { refuseOnSocket } from '../../http/client-errors.js';
import { genRequestId } from '../../http/plugins/request-context.js';
import { acceptUpgrades, upgradesTo } from '../../http/upgrades.js';
import { envelopedExecute, envelopedSubscribe, type GraphQLPipeline } from '../pipeline/pipeline.js';
import { publicError, publicResult } from './public-errors.js';
import { GRAPHQL_PATH } from '../paths.js';

/** decisions §8: a connection has 10 s to send `connection_init`, else it is closed with 4408. */
export const CONNECTION_INIT_TIMEOUT_MS = 10_000;

/**
 * Close codes for a `connection_init` whose credentials could not be checked (they were not refused):
 * 1013 "Try Again Later" (RFC 6455 registry) while the store cannot be reached, which graphql-ws
 * clients retry with back-off; graphql-ws's own 4500 for anything else. Only refused credentials
 * close with 4403 Forbidden.
 */
export const CLOSE_TRY_AGAIN_LATER = 1013;
export const CLOSE_INTERNAL_ERROR = 4500;

/**
 * On shutdown, how long a WebSocket has to answer the server's 1001 close frame before its TCP
 * connection is cut (`terminate()`). A client that answers does so in one round trip; one that
 * stopped reading (a frozen tab, a stopped process, a full receive buffer) never does, and ws's own
 * close timer would hold the drain for 30 s, the whole drain limit (src/cli/serve.ts). gRPC cuts its
 * unresponsive calls likewise after its grace period (src/grpc/server.ts).
 */
export const WS_CLOSE_GRACE_MS = 5_000;

/**
 * Every this often the server pings each WebSocket (a ping frame, graphql-ws's `keepAlive`), and a
 * socket that has not answered a ping this long after it was sent is cut (`terminate()`), which
 * ends its subscriptions as a close does. The pings are traffic, so a proxy's read timeout (nginx's
 * `proxy_read_timeout`, a load balancer's idle timeout) longer than this never closes an idle
 * subscription; and a peer gone without a FIN (a dead NAT entry, a suspended laptop) is found within
 * two intervals, not kept with its subscriptions for ever. 12 s, graphql-ws's own default, as
 * graphql-sse pings its streams; set here so it is named, documented and pinned by a test
 * (test/integration/graphql/ws-keepalive.test.ts).
 */
export const WS_KEEPALIVE_MS = 12_000;

export interface WebSocketOptions {
  /** The ping interval (WS_KEEPALIVE_MS unless a test shortens it). */
  keepAliveMs?: number;
}

/** What the connection remembers between `connection_init` and its operations. */
type Extra = { credentials?: Credentials };

/** Thrown for a credential that is not a string: refused like a malformed one (4403). */
class NotAString extends Error {}

/**
 * A credential from the payload: a string, or absent (`undefined` or `null`). Anything else (a
 * number, an object, a list) is refused as credentials that do not hold, as a malformed string is;
 * until 2026-11-28 it was ignored and the connection ran anonymous.
 */
function credential(params: Record<string, unknown>, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = params[name];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw new NotAString(`${name} is not a string`);
    return value;
  }
  return undefined;
}

/**
 * The payload's credentials: at its top level (decisions §3), else in a `headers` object, the form
 * many client setups use (`connectionParams: { headers: { Authorization } }`), which until
 * 2026-11-29 was silently read as no credentials at all. A `headers` that is not an object is
 * refused as a credential of the wrong type is.
 */
function credentialsOf(params: Record<string, unknown>): Credentials {
  const flat = credentialsIn(params);
  const nested = params.headers;
  if (flat.authorization !== undefined || flat.apiKey !== undefined || nested == null) return flat;
  if (typeof nested !== 'object' || Array.isArray(nested)) throw new NotAString('headers is not an object');
  return credentialsIn(nested as Record<string, unknown>);
}

const credentialsIn = (o: Record<string, unknown>): Credentials => ({
  authorization: credential(o, 'authorization', 'Authorization'),
  apiKey: credential(o, 'x-api-key', 'X-API-Key'),
});

/** The close code ws sent for a frame it refused, which it keeps on the error (`kStatusCode`). */
function closeCodeOf(err: Error): number | undefined {
  const key = Object.getOwnPropertySymbols(err).find((s) => s.description === 'status-code');
  const code: unknown = key === undefined ? undefined : (err as unknown as Record<symbol, unknown>)[key];
  return typeof code === 'number' ? code : undefined;
}

/**
 * Replaces graphql-ws's listener for a socket's 'error' (added by its 'connection' listener, which
 * has just run), which writes the error and its stack to stderr with console.error, outside the
 * JSON log. The errors are ws's: a frame it refused (over
 * the size limit, not UTF-8, against the protocol), after which it has already closed the socket
 * with the matching code (1009, 1007, 1002), a client's fault logged at info as the HTTP parser's
 * refusals are (client-errors.ts), without a stack. Anything else is the server's: a warning with
 * the error, and 4500 as graphql-ws would close.
 */
function logSocketErrors(ws: WebSocket, reqId: string, logger: Logger): void {
  ws.removeAllListeners('error');
  ws.on('error', (err: Error & { code?: string }) => {
    const closeCode = closeCodeOf(err);
    if (closeCode === undefined) {
      logger.warn({ err, reqId }, 'WebSocket error');
      if (ws.readyState === ws.OPEN) ws.close(CLOSE_INTERNAL_ERROR, 'Internal server error');
      return;
    }
    logger.info({ code: err.code, closeCode, reason: err.message, reqId }, 'WebSocket frame refused');
  });
}

/**
 * graphql-ws at /graphql on the Fastify server's HTTP server. Credentials come in the
 * `connection_init` payload (`{ authorization }` or `{ "x-api-key" }`, decisions §3) and are checked
 * there by the shared Authenticator, and again for every operation; bad ones close the socket with 4403, a store that cannot be
 * reached with 1013 and any other failure with 4500 (an outage must not look like bad credentials). Every operation then goes
 * through the pipeline's prepare() (persisted query, parse, validate, context) and the enveloped
 * execute/subscribe (budget), exactly as POST and GET do.
 */
export function attachWebSocket(
  app: FastifyInstance,
  services: Services,
  pipeline: GraphQLPipeline,
  options: WebSocketOptions = {},
): { close(): Promise<void> } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: services.config.bodyLimitBytes });
  /**
   * Each connection's request id, chosen at the upgrade as HTTP chooses one (the client's well-formed
   * X-Request-Id, else a fresh one), sent back on the 101 and the `reqId` of every line the
   * connection logs; its operations add their graphql-ws `id` as `operationId` (docs/graphql.md).
   * Until 2026-11-28 each operation logged a fresh id the client never saw.
   */
  const connectionIds = new WeakMap<IncomingMessage, string>();
  const idOf = (request: IncomingMessage) => {
    let id = connectionIds.get(request);
    if (id === undefined) connectionIds.set(request, (id = genRequestId(request)));
    return id;
  };
  wss.on('headers', (headers, request) => headers.push(`x-request-id: ${idOf(request)}`));
  const pathOf = (request: IncomingMessage) => (request.url ?? '').split('?')[0];
  // Only a GET of /graphql asking for websocket switches protocols; any other Upgrade (h2c from
  // `curl --http2`, a websocket on another path) is ignored and answered over HTTP (upgrades.ts).
  const stopAccepting = acceptUpgrades(
    app.server,
    (request) =>
      request.method === 'GET' && pathOf(request) === GRAPHQL_PATH && upgradesTo(request, 'websocket'),
  );
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Another surface may own this upgrade; with nobody else listening, refuse it.
    if (pathOf(request) !== GRAPHQL_PATH) {
      if (app.server.listenerCount('upgrade') === 1) socket.destroy();
      return;
    }
    if (services.draining) return void socket.destroy();
    wss.handleUpgrade(request, socket, head, (ws) => {
      wss.emit('connection', ws, request);
      logSocketErrors(ws, idOf(request), services.logger);
    });
  };
  app.server.on('upgrade', onUpgrade);
  // A handshake ws refuses (a malformed Sec-WebSocket-Key, an unknown version) is a 400 in the
  // spec's shape, not ws's text/html.
  wss.on('wsClientError', (err: Error, socket: Duplex) => {
    const version: Record<string, string> = /Sec-WebSocket-Version/.test(err.message)
      ? { 'sec-websocket-version': '13, 8' }
      : {};
    refuseOnSocket(socket, 400, err.message, version);
  });

  /**
   * A connection_init whose credentials are refused (4403): one info line, a client's fault as the
   * HTTP parser's refusals are. `reason` is the core's public message (the same text a POST with those
   * credentials gets), never the credentials.
   */
  const refused = (reqId: string, reason: string) =>
    services.logger.info({ reqId, closeCode: 4403, reason }, 'WebSocket connection_init refused');

  /** Every connection that has sent connection_init and not yet closed, for the operations gauge. */
  const open = new Set<{ subscriptions: Record<string, unknown> }>();
  registerGauges(services.metrics, () => ({
    connections: wss.clients.size,
    operations: [...open].reduce((n, ctx) => n + Object.keys(ctx.subscriptions).length, 0),
  }));

  const server = useServer<Record<string, unknown> | undefined, Extra>(
    {
      connectionInitWaitTimeout: CONNECTION_INIT_TIMEOUT_MS,
      // After graphql-ws has ended the connection's subscriptions, whatever closed it (the client,
      // the server, a terminate() for a missed pong).
      onClose: (ctx) => void open.delete(ctx),
      execute: envelopedExecute as never,
      subscribe: envelopedSubscribe as never,
      onConnect: async (ctx) => {
        open.add(ctx);
        const params = ctx.connectionParams ?? {};
        try {
          ctx.extra.credentials = credentialsOf(params);
          await pipeline.authenticate(ctx.extra.credentials, { requestId: idOf(ctx.extra.request) });
          return true;
        } catch (err) {
          const reqId = idOf(ctx.extra.request);
          // A credential of the wrong type: refused credentials, 4403 as below.
          if (err instanceof NotAString) {
            refused(reqId, err.message);
            return false;
          }
          const code = err instanceof GraphQLError ? err.extensions.code : undefined;
          if (code === 'SERVICE_UNAVAILABLE')
            ctx.extra.socket.close(CLOSE_TRY_AGAIN_LATER, 'Service temporarily unavailable');
          else if (code !== 'UNAUTHENTICATED')
            ctx.extra.socket.close(CLOSE_INTERNAL_ERROR, 'Internal server error');
          // Refused credentials: graphql-ws closes with 4403 Forbidden (a socket closed above stays so).
          // The store's failures are logged where they are met (the outage log, the masked error).
          if (code === 'UNAUTHENTICATED') refused(reqId, (err as GraphQLError).message);
          return false;
        }
      },
      onSubscribe: async (ctx, operationId, payload) => {
        const requestId = idOf(ctx.extra.request);
        // Each operation runs as its credentials stand now, as a POST would: a socket may outlive
        // its token's expiry, a revocation, its key or its owner's role, and until 2026-11-28 it
        // kept acting with what connection_init had found (a demoted admin still granted roles).
        let principal: Principal | null;
        try {
          principal = await pipeline.authenticate(ctx.extra.credentials ?? {}, { requestId, operationId });
        } catch (err) {
          if (!(err instanceof GraphQLError)) throw err;
          pipeline.observer.rejected('ws', requestId, payload.operationName, [err], operationId);
          return [err];
        }
        const caller = {
          transport: 'ws' as const,
          principal,
          credentials: ctx.extra.credentials,
          address: ctx.extra.request.socket.remoteAddress ?? 'unknown',
          requestId,
          operationId,
        };
        // The pipeline records the operation (metric and log line) whether it runs or is refused.
        const prepared = await pipeline.prepare(payload, caller);
        return 'errors' in prepared ? prepared.errors : prepared.args;
      },
      // Refusals and results alike, without Yoga's HTTP instructions (`extensions.http`).
      onError: (_ctx, _id, _payload, errors) => errors.map(publicError),
      onNext: (_ctx, _id, _payload, _args, result) => publicResult(result),
    },
    wss,
    options.keepAliveMs ?? WS_KEEPALIVE_MS,
  );

  return {
    /**
     * Shutdown: every socket is closed with 1001 (going away), which clients may reconnect after; a
     * socket that has not completed the close handshake after the grace period is cut.
     */
    async close() {
      app.server.off('upgrade', onUpgrade);
      stopAccepting();
      // graphql-ws sends every client 1001 "Going away", then waits for every socket to be closed:
      // for a client that never answers, until ws's close timer (30 s) destroys it.
      const disposed = server.dispose();
      const grace = setTimeout(() => {
        if (wss.clients.size === 0) return;
        services.logger.warn(
          { sockets: wss.clients.size, grace_ms: WS_CLOSE_GRACE_MS },
          'WebSockets still open after the close grace period; terminating them',
        );
        for (const socket of wss.clients) socket.terminate();
      }, WS_CLOSE_GRACE_MS);
      try {
        await disposed;
      } finally {
        clearTimeout(grace);
      }
    },
  };
}

const CONNECTIONS = 'atrium_graphql_ws_connections';
const OPERATIONS = 'atrium_graphql_ws_operations';

/**
 * Open graphql-ws connections and their operations under way, read at scrape time. Tests may build
 * several apps on one set of services: the last transport attached is the one counted.
 */
function registerGauges(registry: Registry, read: () => { connections: number; operations: number }) {
  for (const name of [CONNECTIONS, OPERATIONS]) registry.removeSingleMetric(name);
  new Gauge({
    name: CONNECTIONS,
    help: 'Open graphql-ws WebSocket connections',
    registers: [registry],
    collect() {
      this.set(read().connections);
    },
  });
  new Gauge({
    name: OPERATIONS,
    help: 'graphql-ws operations under way: live subscriptions, and queries and mutations not yet answered',
    registers: [registry],
    collect() {
      this.set(read().operations);
    },
  });
}
