import { ALL_SCOPES, scopesForRole } from '../auth/scopes.js';
import type { Role } from '../store/types.js';
import { InvalidScope } from './errors.js';

/**
 * Reads a `scope` request parameter (RFC 6749 §3.3): space-delimited, every scope known and
 * allowed. Omitted means the whole allowed set (the documented default).
 */
export function requestedScope(raw: string | undefined, allowed: readonly string[]): string[] {
  if (raw === undefined) return [...allowed];
  const scopes = [...new Set(raw.split(' ').filter((s) => s !== ''))];
  if (scopes.length === 0) return [...allowed];
  const unknown = scopes.filter((s) => !(ALL_SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new InvalidScope(`Unknown scope: ${unknown.join(' ')}.`);
  const refused = scopes.filter((s) => !allowed.includes(s));
  if (refused.length > 0) throw new InvalidScope(`Scope not allowed here: ${refused.join(' ')}.`);
  return scopes;
}

/**
 * The scope a new grant may carry (client credentials, an authorization request): the requested
 * scopes the client is registered for, in the order asked; the rest are dropped (RFC 6749 §3.3
 * lets the server issue less than asked, and the token response's `scope` says what was issued),
 * so a client that asks for everything, as Swagger UI's "select all" does, gets what it may have.
 * An unknown scope is still refused, and so is a request that leaves nothing. A refresh is not a new
 * grant: it may only narrow what was granted (requestedScope, RFC 6749 §6).
 */
export function overlappingScope(raw: string | undefined, allowed: readonly string[]): string[] {
  const requested = requestedScope(raw, ALL_SCOPES);
  const scope = requested.filter((s) => allowed.includes(s));
  if (scope.length === 0) {
    throw new InvalidScope(
      `None of the requested scopes is allowed for this client: ${requested.join(' ')}.`,
    );
  }
  return scope;
}

/** A user can grant only what their role may do; the token carries the overlap (RFC 6749 §3.3). */
export function grantableBy(role: Role, scopes: readonly string[]): string[] {
  const roleScopes = scopesForRole(role);
  return scopes.filter((s) => roleScopes.has(s));
}
