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
 * A surface (HTTP today; GraphQL and gRPC the same way) runs each call inside `runWithSignal`, or
 * builds a `RequestScope` itself when it must ask `committed` before answering on a deadline.
 */
export class RequestScope {
  #committed = false;
  #writesInFlight = 0;

  constructor(readonly signal: AbortSignal) {}

  /**
   * True once some of this request's work will be durable whatever happens now: a transaction has
   * passed its last check and sent COMMIT, or a statement outside a transaction is writing.
   */
  get committed(): boolean {
    return this.#committed || this.#writesInFlight > 0;
  }

  /** Refuses to go on once the request was abandoned. */
  throwIfAbandoned(): void {
    if (this.signal.aborted) throw requestAbandoned();
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

/** Runs `fn` (and everything it starts) as work of the request `scope` stands for. */
export function runInRequestScope<T>(scope: RequestScope, fn: () => T): T {
  return storage.run(scope, fn);
}

/**
 * Runs `fn` so that every core write it makes stops when `signal` aborts: transactions roll back,
 * nothing new is written. The entry point for surfaces (GraphQL resolvers, gRPC handlers).
 */
export function runWithSignal<T>(signal: AbortSignal, fn: () => T): T {
  return runInRequestScope(new RequestScope(signal), fn);
}

/**
 * Runs `fn` outside any request: for compensation that must happen even though the request was
 * abandoned (releasing an idempotency claim), and for long-lived tasks a request merely starts.
 */
export function detachedFromRequest<T>(fn: () => T): T {
  return storage.exit(fn);
}

/** The error a statement of an abandoned request fails with (HTTP 503 `service_unavailable`). */
export function requestAbandoned(): DomainError {
  return new DomainError('unavailable', 'The request took too long and was abandoned; try again.');
}
