import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/errors.js';
import {
  RequestScope,
  endRequestScope,
  enterRequestScope,
  requestAbandoned,
} from '../../domain/request-scope.js';
import { hasControlCharacter } from '../../domain/validate.js';
import { type ErrorShape, sendError } from '../errors.js';

/** A client's X-Request-Id kept as the request's id; nginx's config keeps the same ones. */
export const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const ID_BYTES = 12;
const POOL_IDS = 256;
let pool = '';
let poolNext = POOL_IDS;

/**
 * 12 random bytes as hex, taken from a batch: one CSPRNG call per 256 ids instead of one per
 * request (the call, not the bytes, was the cost: about 2 % of a GET's CPU). Each id is still
 * 12 fresh random bytes, never reused.
 */
function randomHex(): string {
  if (poolNext === POOL_IDS) {
    pool = randomBytes(ID_BYTES * POOL_IDS).toString('hex');
    poolNext = 0;
  }
  const start = poolNext++ * ID_BYTES * 2;
  return pool.slice(start, start + ID_BYTES * 2);
}

/** Request ids: a well-formed client X-Request-Id is kept, otherwise a fresh one is made. */
export function genRequestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && CLIENT_REQUEST_ID.test(given)) return given;
  return `req_${randomHex()}`;
}

export const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'strict-origin-when-cross-origin',
};

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Long-lived routes (SSE, WebSocket upgrades) are exempt from the request deadline. */
    noTimeout?: boolean;
    /**
     * The route only reads: it runs outside the request scope, so it does not keep the scope's
     * AsyncLocalStorage (promise hooks on every promise of the process) enabled. Its deadline still
     * answers 503; it has nothing to roll back.
     */
    readOnly?: boolean;
    /**
     * The route enters the request scope itself (`requestScopeOf`) around the part of its work that
     * may write (GraphQL: mutations), and reads outside it.
     */
    scopeInHandler?: boolean;
    /**
     * The body of the deadline's 503 on an API whose errors are not REST's (GraphQL's
     * `{ errors: [...] }`), as its error handler writes every other refusal.
     */
    errorShape?: ErrorShape;
  }
}

/** A request whose body did not arrive within the deadline. */
function uploadTooSlow(timeoutMs: number): DomainError {
  return new DomainError(
    'validation_error',
    `The request body did not arrive within ${timeoutMs} ms; the connection is closed.`,
    [],
    { status: 408, error: 'request_timeout' },
  );
}

interface Deadline {
  timer: NodeJS.Timeout;
  scope: RequestScope;
  /** The deadline answered (503, or 408 for a body too slow): the handler's own answer is late. */
  answered: boolean;
}

/** Requests under a deadline (every app's: a request object belongs to one app). */
const deadlines = new WeakMap<object, Deadline>();

/**
 * After the deadline has answered, whatever the handler still sends goes nowhere, quietly: its
 * `reply.send` (called by the handler, or by Fastify with what an async handler returns) does
 * nothing. Fastify's own would log `Reply was already sent` as a warning with a stack for every
 * request that outlived its deadline (until 2026-11-29 for every route but GraphQL's, which guarded
 * its own sends).
 */
function dropLateAnswers(request: FastifyRequest, reply: FastifyReply): void {
  reply.send = () => {
    request.log.debug('answer after the deadline dropped');
    return reply;
  };
}

/** The request's scope, for a route that enters it itself (`scopeInHandler`); none without a deadline. */
export function requestScopeOf(request: object): RequestScope | undefined {
  return deadlines.get(request)?.scope;
}

/**
 * Echoes the request id, adds the security headers and enforces the deadline. A route that may
 * write runs in a request scope whose signal aborts at the deadline, so its transactions roll back
 * instead of committing late; the 503 goes out only when none of its work has reached COMMIT. Work
 * that has is answered with its real result, however late, so a client never retries a change that
 * stood. A read-only route gets the same 503 and has nothing to roll back.
 */
export function requestContext(app: FastifyInstance, timeoutMs: number): void {
  // Callback-style hooks throughout: the same steps without a promise and a microtask per hook on
  // every request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    reply.headers(SECURITY_HEADERS);
    const config = request.routeOptions.config;
    if (config?.noTimeout) return done();
    const controller = new AbortController();
    const scope = new RequestScope(controller.signal);
    const timer = setTimeout(() => {
      if (reply.sent || reply.raw.headersSent) return;
      if (scope.committed) {
        request.log.warn({ timeoutMs }, 'deadline passed after the work committed; answering when it ends');
        return;
      }
      // Synchronous with the check above: from here on no statement of this request starts.
      controller.abort();
      deadline.answered = true;
      // The body has not all arrived (a stalled or trickled upload): the client was too slow,
      // not the server, so 408 (RFC 9110 §15.5.9), and the connection is closed, its unread rest
      // of a body being no request, as for slow headers (client-errors.ts).
      if (request.raw.complete === false) {
        reply.raw.shouldKeepAlive = false;
        reply.header('connection', 'close');
        sendError(request, reply, uploadTooSlow(timeoutMs));
      } else {
        sendError(request, reply, requestAbandoned(), undefined, config?.errorShape);
      }
      dropLateAnswers(request, reply);
    }, timeoutMs);
    timer.unref();
    const deadline: Deadline = { timer, scope, answered: false };
    deadlines.set(request, deadline);
    // The scope ends when the response closes: answered (from then on the deadline never aborts its
    // signal, so nothing of the request can be refused any more) or cut off by the client (nobody
    // will read the answer; Fastify runs no onResponse then). An abandoned request's work may still
    // be running and must stay refused: its scope never ends. Work that enters an ended scope runs
    // outside it (request-scope.ts).
    // A read-only route never enters its scope: nothing to end, no listener on its hot path.
    if (!config?.readOnly) {
      reply.raw.once('close', () => {
        if (!scope.signal.aborted) endRequestScope(scope);
      });
    }
    done();
  });

  // An async handler that fails after the deadline answered: Fastify would log `Promise errored, but
  // reply.sent = true was set` at error level with a stack, for what is mostly the deadline's own
  // doing (the abandoned work's next statement refused). The error goes through sendError as on
  // time, so an unexpected one is still logged (`unhandled error`) and a refusal is not; its answer
  // is dropped (above). One wrapper per route, at registration; a handler's result in time is untouched.
  app.addHook('onRoute', (route) => {
    if (route.config?.noTimeout) return;
    const handler = route.handler;
    route.handler = function (this: FastifyInstance, request, reply) {
      const result: unknown = handler.call(this, request, reply);
      // An async handler's promise; anything else (a value, or the reply itself, a thenable of its own) as it was.
      if (!(result instanceof Promise)) return result;
      return result.catch((err: unknown) => {
        if (!deadlines.get(request)?.answered) throw err;
        sendError(request, reply, err);
        return undefined;
      });
    };
  });

  // After parsing, before route-level preHandler hooks and the handler: all they start runs in the
  // scope, unless the route reads only or enters the scope itself.
  app.addHook('preHandler', (request, _reply, done) => {
    const deadline = deadlines.get(request);
    const config = request.routeOptions.config;
    if (deadline === undefined || config?.readOnly || config?.scopeInHandler) return done();
    enterRequestScope(deadline.scope, done);
  });

  // No resource id holds a control character; such a path names nothing, on every engine alike.
  app.addHook('preValidation', (request, _reply, done) => {
    const params = request.params as Record<string, unknown> | undefined;
    if (params) {
      for (const value of Object.values(params)) {
        if (typeof value === 'string' && hasControlCharacter(value)) {
          return done(new DomainError('not_found', 'No such resource.'));
        }
      }
    }
    done();
  });

  app.addHook('onResponse', (request, _reply, done) => {
    const deadline = deadlines.get(request);
    if (deadline) clearTimeout(deadline.timer);
    done();
  });
}
