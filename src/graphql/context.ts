import type { Principal } from '../auth/principal.js';
import type { Services } from '../compose.js';
import { createLoaders, type Loaders } from './loaders.js';
import type { CommentFeed } from './subscriptions/comment-feed.js';

/**
 * What every resolver receives, whatever the transport (POST, GET, WebSocket, SSE). Built once per
 * operation by the one pipeline in src/graphql/pipeline, never by a transport of its own.
 */
export interface GraphQLContext {
  services: Services;
  /** Null for an anonymous caller; resolvers of protected fields raise UNAUTHENTICATED. */
  principal: Principal | null;
  /**
   * Per-operation DataLoaders: batching and caching never outlive one operation. A subscription's
   * events are each an execution of their own, and each gets new ones (`renewLoaders`).
   */
  loaders: Loaders;
  requestId: string;
  /**
   * graphql-ws only: the `id` the client gave the operation's `subscribe` message. `requestId` is
   * then the connection's, shared by all of its operations; this tells them apart in the log.
   */
  operationId?: string | undefined;
  /** Aborted when the client goes away or the deadline passes. */
  signal?: AbortSignal | undefined;
  /** What the complexity budget counts against: the caller's identity, or `anon:<address>`. */
  budgetKey: string;
  /** Live comments for `Subscription.commentAdded`; absent where no subscriptions are served. */
  commentFeed?: CommentFeed | undefined;
  /**
   * Authenticates a stream's credentials again; rejects with UNAUTHENTICATED once they no longer
   * hold (key revoked, user deleted, token expired), and resolves to the caller as they are now, so
   * each event is read under the caller's current role. Absent for anonymous callers and single answers.
   */
  recheck?: (() => Promise<Principal | null>) | undefined;
}

export interface ContextExtras {
  /** The caller's network address, for anonymous budgets. */
  address?: string | undefined;
  commentFeed?: CommentFeed | undefined;
  recheck?: (() => Promise<Principal | null>) | undefined;
  operationId?: string | undefined;
}

export function createContext(
  services: Services,
  principal: Principal | null,
  requestId: string,
  signal?: AbortSignal,
  extras: ContextExtras = {},
): GraphQLContext {
  return {
    services,
    principal,
    loaders: createLoaders(services, principal),
    requestId,
    ...(extras.operationId === undefined ? {} : { operationId: extras.operationId }),
    signal,
    // Per user, as the spec's "complexity budget per user" says: all of a user's keys and tokens
    // spend from one budget (rate limits, unlike it, count per key). A client acting for itself is
    // its own caller.
    budgetKey: principal ? `${principal.kind}:${principal.id}` : `anon:${extras.address ?? 'unknown'}`,
    commentFeed: extras.commentFeed,
    recheck: extras.recheck,
  };
}

/**
 * New loaders for the next execution with this context, for the same caller: what the last one read
 * is dropped. For a subscription's events (the pipeline's `freshLoadersPerEvent`), which the
 * executor runs one after another with the subscription's one context.
 */
export function renewLoaders(context: GraphQLContext): void {
  context.loaders = createLoaders(context.services, context.principal);
}
