import type { Role } from '../store/types.js';
import { DomainError } from '../domain/errors.js';
import type { Principal } from './principal.js';

export const ALL_SCOPES = [
  'orders:read',
  'orders:write',
  'users:read',
  'users:write',
  'content:read',
  'content:write',
  'profile:read',
  'data:export',
] as const;
export type Scope = (typeof ALL_SCOPES)[number];

/**
 * What each scope lets a client do, in the words a person reads on the consent page; the OpenAPI
 * document's OAuth scheme lists the same words (until 2026-11-29 it had its own, which differed).
 */
export const SCOPE_DESCRIPTIONS: Record<Scope, string> = {
  'orders:read': 'See your orders',
  'orders:write': 'Create, change, cancel and refund your orders',
  'users:read': 'See user profiles',
  'users:write': 'Change user profiles',
  'content:read': 'Read posts and comments',
  'content:write': 'Write posts and comments in your name',
  'profile:read': 'See your profile',
  'data:export': 'Export your data',
};

const READ_SCOPES: Scope[] = ['orders:read', 'users:read', 'content:read', 'profile:read'];

/** An API key carries every scope its user's role allows: viewers read, others read and write. */
export function scopesForRole(role: Role): Set<string> {
  return new Set(role === 'viewer' ? READ_SCOPES : ALL_SCOPES);
}

/** Parses a `scope` claim: a space-delimited string or a list of strings. */
export function parseScopeClaim(claim: unknown): Set<string> | null {
  if (typeof claim === 'string') return new Set(claim.split(' ').filter((s) => s !== ''));
  if (Array.isArray(claim) && claim.every((s) => typeof s === 'string')) return new Set(claim as string[]);
  return null;
}

export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.scopes.has(scope);
}

/** Throws the 403 that names the missing scope. */
export function requireScope(principal: Principal, scope: Scope): void {
  if (!principal.scopes.has(scope)) {
    throw new DomainError(
      'insufficient_scope',
      `This request needs the scope "${scope}".`,
      [{ field: null, message: `missing scope ${scope}`, code: 'insufficient_scope' }],
      { scope, via: principal.via },
    );
  }
}
