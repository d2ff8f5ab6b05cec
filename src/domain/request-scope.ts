import { AsyncLocalStorage } from 'node:async_hooks';
import { DomainError } from './errors.js';

/**
 * The request a piece of core work runs for, carried implicitly (AsyncLocalStorage) so no core
 * method needs a signal parameter. The store reads it on every statement (`src/store/request-guard.ts`):
 *
 * - once the signal is aborted, no statement of the request starts: an open transaction fails at
 *   its next statement or at COMMIT and rolls back, and no new write begins;
 * - the last check is made just before COMMIT is sent, in the same tick that marks the scope
 *   `committed`. From then on the work will be durable, so whoever answers on a deadline must
 *   wait for the real result instead of claiming the work was abandoned.
 *
 * HTTP builds a `RequestScope` per request (its deadline asks `committed` before answering 503) and
 * enters it with `enterRequestScope` unless the route is read-only; gRPC writes and GraphQL
 * mutations over a socket run inside `runWithSignal`.
 */
export class RequestScope {
  #committed = false;
  #writesInFlight = 0;

  /**
   * `deadline` (epoch milliseconds, Infinity for none) is compared with the clock at every check, as
   * well as the signal: a timer that aborts the signal cannot fire while work runs without yielding
   * to the event loop (better-sqlite3 answers synchronously), so a request whose deadline has
   * already passed would otherwise commit before its timer ever ran.
   */
  constructor(
    readonly signal: AbortSignal,
    readonly deadline: number = Infinity,
  ) {}

  /**
   * True once some of this request's work will be durable whatever happens now: a transaction has
   * passed its last check and sent COMMIT, or a statement outside a transaction is writing.
   */
  get committed(): boolean {
    return this.#committed || this.#writesInFlight > 0;
  }

  /** Refuses to go on once the request was abandoned. */
  throwIfAbandoned(): void {
    if (this.signal.aborted || Date.now() >= this.deadline) throw requestAbandoned();
  }

  /** The store calls this just before COMMIT: the last moment the work can still be refused. */
  beforeCommit(): void {
    this.throwIfAbandoned();
    this.#committed = true;
  }

  /** The store brackets a write outside a transaction (it commits as soon as it is sent). */
  writeStarted(): void {
    this.throwIfAbandoned();
    this.#writesInFlight += 1;
  }

  writeEnded(): void {
    this.#writesInFlight -= 1;
  }
}

const storage = new AsyncLocalStorage<RequestScope>();

/** The scope of the request this code runs for, if any (the CLI and background jobs have none). */
export function currentRequestScope(): RequestScope | undefined {
  return storage.getStore();
}

/**
 * Scopes entered and not yet ended. On Node 20 an enabled AsyncLocalStorage runs promise hooks for
 * every promise in the process, about a tenth of a gRPC read's CPU; it is enabled only while a scope
 * can be current: from the first `run` until the last open scope has ended, then disabled, so a
 * process that writes now and then does not pay for it on every read in between.
 */
let openScopes = 0;
/** A scope is open from its first `enterRequestScope` until `endRequestScope`; then it is ended for good. */
const states = new WeakMap<RequestScope, 'open' | 'ended'>();

/**
 * Runs `fn` (and everything it starts) as work of the request `scope` stands for, until
 * `endRequestScope(scope)`. The surface that enters a scope ends it once nothing of the request can
 * be refused any more: when its answer has gone out (after that its signal never aborts), or when
 * its work has settled. A scope that is never ended keeps the storage enabled for good (an
 * abandoned request's, whose work must stay refused). Entering the same scope again (a route
 * running part of its work in it) counts once; entering an ended one runs `fn` outside it, as
 * nothing of that request can be refused any more.
 */
export function enterRequestScope<T>(scope: RequestScope, fn: () => T): T {
  const state = states.get(scope);
  if (state === 'ended') return fn();
  if (state === undefined) {
    states.set(scope, 'open');
    openScopes += 1;
  }
  return storage.run(scope, fn);
}

/** Ends `scope`, entered or not: it can no longer be entered, and the storage is off once none is open. */
export function endRequestScope(scope: RequestScope): void {
  const state = states.get(scope);
  states.set(scope, 'ended');
  if (state !== 'open') return;
  openScopes -= 1;
  // No scope can be current any more: every later promise would pay the hooks for nothing.
  if (openScopes === 0) storage.disable();
}

/**
 * Runs `fn` so that every core write it makes stops when `signal` aborts: transactions roll back,
 * nothing new is written. The entry point for surfaces whose work ends with a promise (gRPC
 * handlers, GraphQL mutations over a socket): the scope ends when `fn`'s promise settles. Work `fn`
 * starts without awaiting it is not part of the call: once the scope has ended it may run outside
 * it, as detached work does. `deadline` (epoch ms) also stops it once the clock passes it, even
 * if nothing has aborted `signal` yet (see `RequestScope`).
 */
export async function runWithSignal<T>(
  signal: AbortSignal,
  fn: () => Promise<T>,
  deadline = Infinity,
): Promise<T> {
  const scope = new RequestScope(signal, deadline);
  try {
    return await enterRequestScope(scope, fn);
  } finally {
    endRequestScope(scope);
  }
}

/**
 * Runs `fn` outside any request: for compensation that must happen even though the request was
 * abandoned (releasing an idempotency claim), and for long-lived tasks a request merely starts.
 */
export function detachedFromRequest<T>(fn: () => T): T {
  return storage.exit(fn);
}

/**
 * What a statement of an abandoned request fails with: a DomainError `unavailable` (HTTP 503
 * `service_unavailable`), of its own class so a surface can tell it from other failures (gRPC
 * answers DEADLINE_EXCEEDED for it once the call's deadline has passed).
 */
export class RequestAbandoned extends DomainError {
  constructor() {
    super('unavailable', 'The request took too long and was abandoned; try again.');
  }
}

export function requestAbandoned(): DomainError {
  return new RequestAbandoned();
}
