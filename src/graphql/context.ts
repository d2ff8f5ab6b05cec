import type { Principal } from '../auth/principal.js';
import type { Services } from '../compose.js';
import { createLoaders, type Loaders } from './loaders.js';

/**
 * What every resolver receives, whatever the transport (POST, GET, WebSocket, SSE). Built once per
 * operation by the one pipeline in src/graphql/pipeline, never by a transport of its own.
 */
export interface GraphQLContext {
  services: Services;
  /** Null for an anonymous caller; resolvers of protected fields raise UNAUTHENTICATED. */
  principal: Principal | null;
  /** Per-operation DataLoaders: batching and caching never outlive one operation. */
  loaders: Loaders;
  requestId: string;
  /** Aborted when the client goes away or the deadline passes. */
  signal?: AbortSignal | undefined;
}

export function createContext(
  services: Services,
  principal: Principal | null,
  requestId: string,
  signal?: AbortSignal,
): GraphQLContext {
  return { services, principal, loaders: createLoaders(services, principal), requestId, signal };
}
