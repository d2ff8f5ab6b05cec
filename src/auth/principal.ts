import type { Actor } from '../domain/actor.js';
import type { Tier } from '../store/types.js';

/**
 * One caller, however it authenticated. Every surface (REST, GraphQL, gRPC) gets one of these from
 * the same Authenticator and hands its Actor part to the core.
 */
export interface Principal extends Actor {
  scopes: ReadonlySet<string>;
  via: 'api_key' | 'bearer';
  /** The API key's tier; null for bearer callers and keys without a tier (default limit). */
  tier: Tier | null;
  apiKeyId: string | null;
  /** The OAuth client the token was issued to, when there is one. */
  clientId: string | null;
  tokenExpiresAt: Date | null;
  /** What rate limits count against (per key, or per token subject); GraphQL budgets count per user. */
  rateLimitKey: string;
}

export function toActor(p: Principal): Actor {
  return { id: p.id, kind: p.kind, role: p.role };
}
