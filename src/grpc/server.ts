import { constants, type Http2Session } from 'node:http2';
import { Server as NetServer, type Socket } from 'node:net';
import { formatWithOptions } from 'node:util';
import { Server, ServerCredentials, type ServerDuplexStream, setLogger } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Services } from '../compose.js';
import { UserActivity } from '../domain/activity.js';
import { CallPipeline } from './call.js';
import { UserServiceService } from './gen/users/v1/users.gen.js';
import { FIRST_REQUEST_GRACE_MS } from '../process/first-request.js';
import { checkReadiness, checksFor } from '../process/readiness.js';
import { Health } from './health.js';
import { redactHeaderText } from '../observability/logger.js';
import { grpcMetrics } from './metrics.js';
import { reflectionService } from './reflection.js';
import { strictStrings } from './strict-strings.js';
import { markUndecodable, refusingUndecodable } from './undecodable.js';
import { userServiceHandlers } from './user-service.js';

export const USER_SERVICE = 'users.v1.UserService';
/** Larger responses than any User or page of them; requests are capped by BODY_LIMIT_BYTES as HTTP bodies are. */
const MAX_SEND_BYTES = 4 * 1024 * 1024;

export interface GrpcOptions {
  /** How long a drain waits for in-flight calls before cutting them off. */
  drainGraceMs?: number;
  activityPollMs?: number;
  /**
   * How often health asks the readiness checks (/readyz's) while listening. Check and Watch answer
   * the last result, so a status is at most this plus the checks' 2 s timeout old.
   */
  healthProbeMs?: number;
}

/**
 * Often enough that a balancer or Kubernetes probe (every 10 s by default) sees an outage at its
 * next look; one `select 1` (and a Redis PING) every 2 s costs a process nothing measurable.
 */
export const DEFAULT_HEALTH_PROBE_MS = 2_000;

export interface GrpcServer {
  /**
   * Binds HOST:GRPC_PORT (0 picks a free port), asks the readiness checks once (health is SERVING
   * only if they pass) and returns the bound `host:port`.
   */
  listen(): Promise<string>;
  /**
   * The drain: health turns NOT_SERVING, new calls are refused (UNAVAILABLE), activity streams and
   * health watches end with status OK, in-flight unary calls and listings finish, then the server
   * stops; after the grace period whatever is left is cancelled.
   */
  close(): Promise<void>;
  /** Health turns NOT_SERVING at the start of a drain, while calls are still served. */
  announceDrain(): void;
  /**
   * For a drain behind a balancer: refuse new connections and ask every open one to go away after
   * its calls (HTTP/2 GOAWAY with the highest stream id, as grpc-js's own max-age does), so nginx
   * stops using them and closes them itself. Calls already received are served. (A call that
   * crosses the first GOAWAY on the wire is not: nghttp2 ignores a new stream once it has sent a
   * GOAWAY, whatever its last stream id, and sends no refusal.)
   * Called again and again while the drain waits (src/compose.ts): each call also reads what an idle
   * connection's peer sent since (ConnectionBook.keepReading), so that its close is seen.
   */
  stopAccepting(): void;
  /**
   * HTTP/2 connections a drain waits for a balancer to close: every open one, except one that has not
   * sent the HTTP/2 preface after FIRST_REQUEST_GRACE_MS (a port scanner, a TCP health check: it never
   * answers the GOAWAY, and the drain's close destroys it).
   */
  openSessions(): number;
}

/**
 * grpc-js keeps its listeners and connections private, and has no "stop accepting, keep serving"
 * step (unbind and tryShutdown close connections at once: a call nginx writes on one at that moment
 * fails, and nginx never resends a POST). These are its fields as of 1.14; without them the drain
 * simply skips the step.
 */
interface GrpcInternals {
  http2Servers?: Map<NetServer, unknown>;
  sessions?: Map<Http2Session, unknown>;
}

/**
 * grpc-js writes its own messages to stderr as plain text ("E No address added ..."), which breaks
 * the one-JSON-line-per-entry log (and a refused start's single line). They go through pino
 * instead. The logger is process-wide in grpc-js: the last server made sets it.
 */
function routeGrpcJsLogs(logger: Logger): void {
  const log = logger.child({ component: 'grpc-js' });
  // Its traces (GRPC_TRACE) quote each call's metadata, credentials included.
  const text = (message: unknown, rest: unknown[]) =>
    redactHeaderText(formatWithOptions({ breakLength: Infinity }, message, ...rest));
  setLogger({
    error: (message: unknown, ...rest: unknown[]) => {
      // A failed bind: bindAsync's error says the same and more, and the start reports that.
      if (typeof message === 'string' && message.startsWith('No address added')) return;
      log.warn(text(message, rest));
    },
    info: (message: unknown, ...rest: unknown[]) => log.info(text(message, rest)),
    debug: (message: unknown, ...rest: unknown[]) => log.debug(text(message, rest)),
  });
}

/**
 * grpc-js answers a method no service registers with UNIMPLEMENTED itself, before any handler or
 * server interceptor runs: no `x-request-id`, no log line, no metric (until 2026-11-28). Its lookup
 * of the handler (a private method, as of 1.14) is wrapped so that such a call gets a handler of
 * ours: a bidi one, so it is answered at once whatever the client streams, with the raw bytes left
 * undecoded. Without that method (a later grpc-js) the wrapping is skipped and grpc-js answers as
 * before; test/integration/grpc/unknown-method.test.ts then fails.
 */
function answerUnknownMethods(server: Server, pipeline: CallPipeline): void {
  const internals = server as unknown as { _retrieveHandler?: (path: string) => unknown };
  const lookup = internals._retrieveHandler;
  if (typeof lookup !== 'function') return;
  internals._retrieveHandler = function (this: Server, path: string) {
    return (
      lookup.call(this, path) ?? {
        type: 'bidi',
        path,
        serialize: (b: Buffer) => b,
        deserialize: (b: Buffer) => b,
        func: (call: ServerDuplexStream<Buffer, Buffer>) => pipeline.unimplemented(call, path),
      }
    );
  };
}

/** The gRPC surface: users.v1.UserService, grpc.health.v1.Health and server reflection. */
export function createGrpcServer(services: Services, options: GrpcOptions = {}): GrpcServer {
  const { config } = services;
  routeGrpcJsLogs(services.logger);
  const server = new Server({
    'grpc.max_receive_message_length': config.bodyLimitBytes,
    'grpc.max_send_message_length': MAX_SEND_BYTES,
  });
  const pipeline = new CallPipeline({
    service: USER_SERVICE,
    authenticator: services.authenticator,
    afterAuth: services.afterAuth,
    logger: services.logger,
    storeOutage: services.storeOutage,
    metrics: grpcMetrics(services.metrics),
  });
  server.addService(
    // A request that cannot be decoded reaches the pipeline (INVALID_ARGUMENT, logged, counted).
    // Strings must be UTF-8 (proto3): one that is not is refused naming its field (strict-strings.ts).
    markUndecodable(strictStrings(UserServiceService)),
    userServiceHandlers(pipeline, {
      core: services.core,
      activity: new UserActivity(services.deps, services.core.users),
      cache: services.cache,
      ...(options.activityPollMs === undefined ? {} : { activityPollMs: options.activityPollMs }),
    }),
  );
  answerUnknownMethods(server, pipeline);
  const health = new Health([USER_SERVICE]);
  health.addToServer(server);
  // Library handlers: an undecodable request is INVALID_ARGUMENT there too, not grpc-js's INTERNAL.
  reflectionService().addToServer(refusingUndecodable(server));

  let bound = false;
  let closed: Promise<void> | undefined;
  const connections = new ConnectionBook();
  // What the gRPC role needs (database, and Redis when configured), asked as /readyz asks it.
  const checks = checksFor(services.readiness, ['grpc']);
  const ready = async () => (await checkReadiness(checks, () => services.draining)).ready;
  const announceDrain = () => health.drain();
  return {
    async listen() {
      // grpc-js parses `::1:50051` as a host `::1:50051` without a port, which fails with
      // EADDRNOTAVAIL: an IPv6 address takes brackets here, as in a URL.
      const host =
        config.host.includes(':') && !config.host.startsWith('[') ? `[${config.host}]` : config.host;
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`${host}:${config.grpcPort}`, ServerCredentials.createInsecure(), (err, p) =>
          err ? reject(err) : resolve(p),
        ),
      );
      bound = true;
      for (const listener of (server as unknown as GrpcInternals).http2Servers?.keys() ?? []) {
        connections.watch(listener);
      }
      await health.follow(ready, options.healthProbeMs ?? DEFAULT_HEALTH_PROBE_MS);
      return `${host}:${port}`;
    },
    announceDrain,
    stopAccepting() {
      const internals = server as unknown as GrpcInternals;
      for (const listener of internals.http2Servers?.keys() ?? []) {
        // net.Server's close: stops accepting, leaves the open sessions alone.
        if (listener.listening) NetServer.prototype.close.call(listener);
      }
      for (const session of internals.sessions?.keys() ?? []) {
        if (session.closed || session.destroyed) continue;
        try {
          session.goaway(constants.NGHTTP2_NO_ERROR, 2 ** 31 - 1);
        } catch {
          // closed in between
        }
        connections.keepReading(session);
      }
    },
    openSessions() {
      const sessions = (server as unknown as GrpcInternals).sessions;
      let n = 0;
      const now = Date.now();
      for (const session of sessions?.keys() ?? []) {
        if (session.closed || session.destroyed || connections.silent(session, now)) continue;
        n++;
      }
      return n;
    },
    close() {
      closed ??= (async () => {
        announceDrain();
        pipeline.drain();
        health.endWatches();
        if (!bound) return;
        await new Promise<void>((resolve) => {
          const force = setTimeout(() => {
            const calls = connections.openCalls();
            if (calls > 0) {
              services.logger.warn(
                { calls },
                'gRPC calls still open after the drain grace period; cancelling them',
              );
            } else {
              services.logger.info(
                { connections: connections.open() },
                'gRPC connections with no call still open after the drain grace period; closing them',
              );
            }
            server.forceShutdown();
            // grpc-js's forceShutdown only ends the sockets of sessions it already closed: a peer that
            // never ends its side keeps them half open, and they hold the process.
            connections.destroyAll();
            resolve();
          }, options.drainGraceMs ?? 10_000);
          force.unref();
          server.tryShutdown(() => {
            clearTimeout(force);
            resolve();
          });
          // Connections that never began HTTP/2 (a port scanner, a TCP health check) carry no call and
          // never answer the GOAWAY: they would hold the drain for the whole grace period.
          connections.destroySilent();
        });
      })();
      return closed;
    },
  };
}

/**
 * The raw sockets under grpc-js's HTTP/2 sessions, which grpc-js keeps private (and Node hides
 * behind a proxy that refuses destroy()), with what each has carried.
 */
class ConnectionBook {
  private readonly entries = new Map<
    Http2Session,
    { socket: Socket; accepted: number; spoke: boolean; calls: number }
  >();

  watch(listener: NetServer): void {
    let accepted: Socket | undefined;
    // Node's HTTP/2 server makes the session in its own 'connection' listener and emits 'session'
    // from there, synchronously: the socket seen just before is that session's.
    listener.prependListener('connection', (socket: Socket) => (accepted = socket));
    listener.on('session', (session: Http2Session) => {
      const socket = accepted;
      accepted = undefined;
      if (!socket) return;
      const entry = { socket, accepted: Date.now(), spoke: false, calls: 0 };
      this.entries.set(session, entry);
      // The client's first SETTINGS frame follows its connection preface.
      session.once('remoteSettings', () => (entry.spoke = true));
      session.on('stream', (stream: { once(event: 'close', listener: () => void): unknown }) => {
        entry.spoke = true;
        entry.calls += 1;
        stream.once('close', () => (entry.calls -= 1));
      });
      // The socket's close, not the session's: a session closed gracefully can leave its socket half open.
      socket.once('close', () => this.entries.delete(session));
    });
  }

  /**
   * Once a session has sent a GOAWAY and has no stream open, nghttp2 reports it wants to read no more
   * (it expects the server to drop the connection) and Node stops reading its socket: the peer's
   * close (a grpc-js channel, nginx, each closes its connection on the GOAWAY) then sits unread, the
   * session never closes, and the drain's step 2 waited its whole SHUTDOWN_DELAY_MS for it. Closing
   * such a session ourselves instead would cut a connection whose peer may not have read the GOAWAY
   * yet, and step 2 exists to let the balancer close first. So it is made to read again: its socket's
   * handle (the one Node's session reads from) resumes reading, and the peer's close then ends the
   * socket (and the session). Node stops again after each read that leaves it idle,
   * hence a call each time stopAccepting repeats its GOAWAY. Only while no call is open on it: with
   * one, Node reads by itself, and may have stopped for a write's backpressure.
   */
  keepReading(session: Http2Session): void {
    const entry = this.entries.get(session);
    if (!entry || entry.calls > 0 || session.destroyed) return;
    // net.Socket's libuv handle, private but stable; without it the drain waits as before.
    const handle = (entry.socket as unknown as { _handle?: { readStart?: () => number } | null })._handle;
    handle?.readStart?.();
  }

  /** Connections that have not sent even the HTTP/2 preface: nothing on them can be lost. */
  destroySilent(): void {
    for (const { socket, spoke } of this.entries.values()) if (!spoke) socket.destroy();
  }

  /** Has not sent the preface since it was accepted FIRST_REQUEST_GRACE_MS ago or more. */
  silent(session: Http2Session, now: number): boolean {
    const entry = this.entries.get(session);
    return entry !== undefined && !entry.spoke && now - entry.accepted >= FIRST_REQUEST_GRACE_MS;
  }

  destroyAll(): void {
    for (const { socket } of this.entries.values()) socket.destroy();
  }

  openCalls(): number {
    let n = 0;
    for (const { calls } of this.entries.values()) n += calls;
    return n;
  }

  open(): number {
    return this.entries.size;
  }
}
