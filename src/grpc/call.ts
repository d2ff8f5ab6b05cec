import {
  Metadata,
  status,
  type handleServerStreamingCall,
  type handleUnaryCall,
  type ServerUnaryCall,
  type ServerWritableStream,
} from '@grpc/grpc-js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { type Authenticator, missingCredentials } from '../auth/authenticator.js';
import { type Principal, toActor } from '../auth/principal.js';
import { requireScope, type Scope } from '../auth/scopes.js';
import type { Actor } from '../domain/actor.js';
import { RequestAbandoned, runWithSignal } from '../domain/request-scope.js';
import { RequestUsers } from '../domain/request-users.js';
import type { AfterAuthentication } from '../http/auth.js';
import { genRequestId } from '../http/plugins/request-context.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import { serviceError, toServiceError } from './errors.js';
import type { GrpcMetrics } from './metrics.js';
import { RefusedRequest } from './strict-strings.js';
import { UNDECODABLE, UNDECODABLE_MESSAGE } from './undecodable.js';

/** What a handler gets: the caller, already authenticated, rate-limited and scope-checked. */
export interface CallContext {
  principal: Principal;
  actor: Actor;
  requestId: string;
  log: Logger;
  /** Aborted when the client cancels, its deadline passes, or (for streams) the server drains. */
  signal: AbortSignal;
  /** The call's deadline in epoch milliseconds (Infinity when the client set none). */
  readonly deadline: number;
  /** Users this call has read already (the caller, when a key authenticated it): for core reads. */
  users: RequestUsers;
  /**
   * Authenticates the call's credentials again; rejects (UNAUTHENTICATED) once they no longer hold,
   * and resolves to the caller as they are now (their role may have changed since the call began).
   * A stream asks before it sends what it read, so a key revoked or a user deleted meanwhile ends it.
   */
  recheck(): Promise<Actor>;
}

export type UnaryHandler<Req, Res> = (ctx: CallContext, request: Req) => Promise<Res>;
/** `send` resolves once the message is accepted by the transport (back-pressure) and rejects when aborted. */
export type StreamHandler<Req, Res> = (
  ctx: CallContext,
  request: Req,
  send: (message: Res) => Promise<void>,
) => Promise<void>;

export interface CallPipelineDeps {
  service: string;
  authenticator: Authenticator;
  /** The same post-authentication steps REST runs (the shared rate limiter). */
  afterAuth: readonly AfterAuthentication[];
  logger: Logger;
  /** The process's database outage log (`Services.storeOutage`): an outage is one line, not one per call. */
  storeOutage: StoreOutageLog;
  metrics: GrpcMetrics;
}

type AnyCall = ServerUnaryCall<unknown, unknown> | ServerWritableStream<unknown, unknown>;

class Aborted extends Error {}

const first = (md: Metadata, key: string): string | undefined => {
  const v = md.get(key)[0];
  return typeof v === 'string' ? v : undefined;
};

/**
 * The one interceptor every UserService method goes through, in this order: request id → refuse
 * an undecodable request message → refuse while draining → credentials from metadata through the
 * shared Authenticator → the shared post-authentication steps (rate limit) → scope → handler →
 * DomainError to status (errors.ts) → one log line and the metrics. Handlers never read metadata or build statuses themselves.
 */
export class CallPipeline {
  private draining = false;
  /** Open streams, so a drain can end them with a clean status. */
  private readonly streams = new Set<AbortController>();
  /**
   * The access line's logger. Its fields are the request id (checked against a strict pattern),
   * the method, the status and the duration: nothing a redact path could match, and matching
   * the paths cost more than the rest of the line.
   */
  private readonly accessLog: Logger;

  constructor(private readonly deps: CallPipelineDeps) {
    this.accessLog = deps.logger.child({}, { redact: { paths: [] } });
  }

  /** From now on new calls are refused and open streams end (status OK) at their next step. */
  drain(): void {
    this.draining = true;
    for (const s of this.streams) s.abort(new Aborted('draining'));
  }

  /**
   * `options.writes`: the handler changes data, so it runs in a request scope bound to the call's
   * cancel signal and deadline (`runWithSignal`): once the client cancels or its deadline passes,
   * no statement of the call starts and an open transaction rolls back instead of committing a
   * change the client was told failed; the call then ends with DEADLINE_EXCEEDED. The deadline is
   * compared with the clock at each statement, not only through grpc-js's timer: on SQLite a call
   * runs to its COMMIT without the timer getting a turn, so one whose `grpc-timeout` was already
   * spent on arrival (`1n`) would otherwise commit and answer OK. Reads go without: while any scope is open, its AsyncLocalStorage costs every
   * promise of the process (request-scope.ts turns it off again when the last one ends).
   */
  unary<Req, Res>(
    method: string,
    scope: Scope,
    handler: UnaryHandler<Req, Res>,
    options: { writes?: boolean } = {},
  ): handleUnaryCall<Req, Res> {
    const labels = this.labelsFor(method, 'unary');
    const run: UnaryHandler<Req, Res> = options.writes
      ? (ctx, request) => runWithSignal(ctx.signal, () => handler(ctx, request), ctx.deadline)
      : handler;
    return (call, callback) => {
      const started = this.begin(method, labels, call as AnyCall);
      const cancel = new LazySignal();
      let finished = false;
      // grpc-js reports every call as cancelled once its status is sent: only a cancel before that
      // one is the client's (or its deadline's).
      call.once('cancelled', () => {
        if (!finished) cancel.abort(new Aborted('cancelled'));
      });
      // Cancelled before the handler was called (grpc-js's deadline timer): the event has gone.
      if (call.cancelled) cancel.abort(new Aborted('cancelled'));
      this.prepare(call as AnyCall, scope, started, cancel)
        .then((ctx) => run(ctx, call.request))
        .then((result) => {
          finished = true;
          call.sendMetadata(started.response);
          callback(null, result);
          this.finish(started, call.cancelled ? cancelCode(call as AnyCall) : status.OK);
        })
        .catch((err: unknown) => {
          finished = true;
          const error =
            err instanceof RequestAbandoned && deadlineOf(call as AnyCall) <= Date.now()
              ? serviceError(status.DEADLINE_EXCEEDED, 'Deadline exceeded', started.response.clone())
              : toServiceError(err, started.response, started.log, this.deps.storeOutage);
          callback(error);
          this.finish(started, call.cancelled ? cancelCode(call as AnyCall) : error.code);
        });
    };
  }

  serverStream<Req, Res>(
    method: string,
    scope: Scope,
    handler: StreamHandler<Req, Res>,
    options: { endOnDrain: boolean },
  ): handleServerStreamingCall<Req, Res> {
    const labels = this.labelsFor(method, 'server_stream');
    return (call) => {
      const started = this.begin(method, labels, call as AnyCall);
      const controller = new AbortController();
      // Open-ended streams end at a drain; finite ones (a listing) finish like unary calls do.
      if (options.endOnDrain) this.streams.add(controller);
      call.on('cancelled', () => controller.abort(new Aborted('cancelled')));
      const send = (message: Res): Promise<void> => {
        if (controller.signal.aborted) return Promise.reject(new Aborted('aborted'));
        if (call.write(message)) return Promise.resolve();
        return new Promise<void>((resolve, reject) => {
          const onAbort = () => {
            call.off('drain', onDrain);
            reject(new Aborted('aborted'));
          };
          const onDrain = () => {
            controller.signal.removeEventListener('abort', onAbort);
            resolve();
          };
          call.once('drain', onDrain);
          controller.signal.addEventListener('abort', onAbort, { once: true });
        });
      };
      this.prepare(call as AnyCall, scope, started, controller)
        .then(async (ctx) => {
          call.sendMetadata(started.response);
          try {
            await handler(ctx, call.request, send);
          } catch (err) {
            if (!(err instanceof Aborted)) throw err;
          }
          if (call.cancelled) return this.finish(started, cancelCode(call as AnyCall));
          // Finished, or ended by a drain: a clean end of stream either way.
          call.end(requestIdMetadata(started.requestId));
          this.finish(started, status.OK);
        })
        .catch((err: unknown) => {
          if (call.cancelled) return this.finish(started, cancelCode(call as AnyCall));
          const error = toServiceError(err, started.response, started.log, this.deps.storeOutage);
          call.emit('error', error);
          this.finish(started, error.code);
        })
        .finally(() => this.streams.delete(controller));
    };
  }

  /** Label sets are made once per method: prom-client hashes them on every call, they never change. */
  private labelsFor(method: string, type: string): MethodLabels {
    const base = { grpc_service: this.deps.service, grpc_method: method, grpc_type: type };
    const byCode = new Map<status, Labels & { grpc_code: string }>();
    return {
      base,
      withCode(code) {
        let labels = byCode.get(code);
        if (labels === undefined) {
          labels = { ...base, grpc_code: status[code] ?? String(code) };
          byCode.set(code, labels);
        }
        return labels;
      },
    };
  }

  /**
   * A call to a method no service registers, which server.ts hands here instead of letting grpc-js
   * answer it unseen: UNIMPLEMENTED with grpc-js's own message, the `x-request-id`, one access line
   * (`rpc` is the path asked for) and the metrics. Its labels are all `unknown`: the path is the
   * client's choice, and as labels it would grow the series without bound.
   */
  unimplemented(
    call: { metadata: Metadata; emit(event: 'error', err: unknown): boolean },
    path: string,
  ): void {
    this.unknownLabels ??= (() => {
      const labels = this.labelsFor('unknown', 'unknown');
      const base = { ...labels.base, grpc_service: 'unknown' };
      return { base, withCode: (code: status) => ({ ...labels.withCode(code), grpc_service: 'unknown' }) };
    })();
    const started = this.begin('unknown', this.unknownLabels, call as AnyCall, path);
    call.emit(
      'error',
      serviceError(
        status.UNIMPLEMENTED,
        `The server does not implement the method ${path}`,
        started.response,
      ),
    );
    this.finish(started, status.UNIMPLEMENTED);
  }

  private unknownLabels: MethodLabels | undefined;

  private begin(method: string, labels: MethodLabels, call: AnyCall, rpc?: string): Started {
    const requestId = genRequestId({ headers: { 'x-request-id': first(call.metadata, 'x-request-id') } });
    this.deps.metrics.started.inc(labels.base);
    return new Started(requestId, method, labels, this.deps.logger, rpc);
  }

  private finish(started: Started, code: status): void {
    const seconds = Number(process.hrtime.bigint() - started.at) / 1e9;
    this.deps.metrics.handled.inc(started.labels.withCode(code));
    this.deps.metrics.seconds.observe(started.labels.base, seconds);
    // The request id in the line writes what the call's child logger would, without making a
    // child for every call.
    this.accessLog.info(
      {
        request_id: started.requestId,
        rpc: started.rpc ?? `/${this.deps.service}/${started.method}`,
        code: status[code] ?? code,
        ms: Math.round(seconds * 10_000) / 10,
      },
      'grpc call',
    );
  }

  /** Everything before the handler. Response metadata collects the request id and rate-limit facts. */
  private async prepare(
    call: AnyCall,
    scope: Scope,
    started: Started,
    cancel: { readonly signal: AbortSignal },
  ): Promise<CallContext> {
    // The client's own bad bytes (undecodable.ts): refused before any authentication work.
    if (call.request === UNDECODABLE) throw serviceError(status.INVALID_ARGUMENT, UNDECODABLE_MESSAGE);
    // A string field that is not UTF-8 (strict-strings.ts): refused as well, naming the field.
    if (call.request instanceof RefusedRequest) throw call.request.error;
    if (this.draining) throw serviceError(status.UNAVAILABLE, 'The server is shutting down; retry.');
    const users = new RequestUsers();
    const credentials = {
      authorization: first(call.metadata, 'authorization'),
      apiKey: first(call.metadata, 'x-api-key'),
    };
    const { authenticator } = this.deps;
    const principal = await authenticator.authenticate(credentials, users);
    if (!principal) throw missingCredentials();
    // The REST steps run unchanged: the call stands in for both their request (they read `log`) and
    // their reply (they set headers, which become response metadata: x-ratelimit-limit, -remaining, -reset).
    const request = started as unknown as FastifyRequest;
    const reply = started as unknown as FastifyReply;
    for (const step of this.deps.afterAuth) await step(principal, request, reply);
    requireScope(principal, scope);
    return {
      principal,
      actor: toActor(principal),
      requestId: started.requestId,
      users,
      recheck: async () => {
        const now = await authenticator.authenticate(credentials);
        if (!now) throw missingCredentials();
        return toActor(now);
      },
      get log() {
        return started.log;
      },
      get signal() {
        return cancel.signal;
      },
      get deadline() {
        return deadlineOf(call);
      },
    };
  }
}

type Labels = { grpc_service: string; grpc_method: string; grpc_type: string };

interface MethodLabels {
  base: Labels;
  withCode(code: status): Labels & { grpc_code: string };
}

/** One call in flight: its id, response metadata, timing, and a logger made only when used. */
class Started {
  /** Sent as response headers on success and merged into the trailers of an error. */
  readonly response: Metadata;
  readonly at = process.hrtime.bigint();
  private child: Logger | undefined;

  constructor(
    readonly requestId: string,
    readonly method: string,
    readonly labels: MethodLabels,
    private readonly logger: Logger,
    /** The path of a call to no known method; otherwise the service's and `method`'s. */
    readonly rpc?: string,
  ) {
    this.response = requestIdMetadata(requestId);
  }

  /** The call's logger (with its request id); most calls never log but their access line. */
  get log(): Logger {
    return (this.child ??= this.logger.child({ request_id: this.requestId }));
  }

  /** The REST steps' reply: their headers (x-ratelimit-*) become response metadata. */
  headers(values: Record<string, string>): this {
    for (const name in values) this.response.set(name, values[name]!);
    return this;
  }
}

/**
 * A unary call's abort signal, made only when a handler reads it: GetUser never does, and an
 * AbortController per call was a measurable share of its cost.
 */
class LazySignal {
  private controller: AbortController | undefined;
  private reason: Aborted | undefined;

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.reason !== undefined) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: Aborted): void {
    this.reason ??= reason;
    this.controller?.abort(reason);
  }
}

function requestIdMetadata(requestId: string): Metadata {
  const md = new Metadata();
  md.set('x-request-id', requestId);
  return md;
}

/**
 * The server's copy of the deadline is computed from `grpc-timeout` on arrival, so it lags the
 * client's a little: a client giving up at its deadline cancels just before the server's passes.
 */
const DEADLINE_SLACK_MS = 250;

/** The call's deadline in epoch milliseconds; Infinity when the client set none. */
function deadlineOf(call: AnyCall): number {
  const deadline = call.getDeadline();
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

function cancelCode(call: AnyCall): status {
  const ms = deadlineOf(call);
  return Number.isFinite(ms) && ms <= Date.now() + DEADLINE_SLACK_MS
    ? status.DEADLINE_EXCEEDED
    : status.CANCELLED;
}
