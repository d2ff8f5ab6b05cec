import type { Actor } from './actor.js';
import { isAdmin } from './actor.js';
import { DomainError, forbidden } from './errors.js';

/**
 * Who may see and change users and organizations. Every surface (REST, GraphQL, gRPC, CLI) asks
 * these functions, so a rule is written once. `viewer` is null for an anonymous caller.
 */
export type Viewer = Actor | null;

/** The whole user record (email included): the user themself or an admin. */
export function mayReadUser(viewer: Viewer, userId: string): boolean {
  return viewer !== null && (isAdmin(viewer) || (viewer.kind === 'user' && viewer.id === userId));
}

export function assertMayReadUser(viewer: Viewer, userId: string): void {
  if (!mayReadUser(viewer, userId)) throw forbidden('You may read only your own user record.');
}

/**
 * Listing users (GraphQL `users`, gRPC `ListUsers`) takes a caller: anyone signed in sees the public
 * profiles, but an anonymous caller may not enumerate the accounts. The spec requires a caller for
 * `me` only and leaves the list open; REST reads a user only for an authenticated caller, and the
 * list follows that, not the looser reading.
 */
export function assertMayListUsers(viewer: Viewer): asserts viewer is Actor {
  if (viewer === null) {
    throw new DomainError(
      'unauthenticated',
      'Authentication required: send X-API-Key or Authorization: Bearer.',
    );
  }
}

/**
 * Users as hits of a search (GraphQL `search`, `searchAll`): a search must not enumerate accounts
 * that the caller could not list. So only for a caller who may list users (`assertMayListUsers`: not
 * anonymous) and whose credentials grant `users:read`, the scope of reading a user by id. `scopes`
 * are the credentials' scopes; null or absent for a caller not limited by scopes (the operator).
 */
export function maySearchUsers(viewer: Viewer, scopes?: ReadonlySet<string> | null): boolean {
  return viewer !== null && (scopes == null || scopes.has('users:read'));
}

/**
 * The spec's email rule: visible only to the user themself or to an admin. Surfaces that show other
 * users (GraphQL authors, search hits) render the email as null/error when this says no.
 */
export function mayViewEmail(viewer: Viewer, user: { id: string }): boolean {
  return mayReadUser(viewer, user.id);
}

/** An organization: its members or an admin. `viewerOrganizationId` is the viewer's own, if a user. */
export function mayReadOrganization(
  viewer: Viewer,
  viewerOrganizationId: string | null,
  organizationId: string,
): boolean {
  return viewer !== null && (isAdmin(viewer) || viewerOrganizationId === organizationId);
}

/** The fields an update may carry; the policy decides by which are present. */
export type UserField = 'name' | 'firstName' | 'lastName' | 'email' | 'role';

/**
 * A named rule for changing users. Two exist: REST `PATCH /v1/users/{id}` is admin-only; GraphQL
 * `updateUser` and gRPC `UpdateUser` are self-service (decisions §3).
 */
export interface UserUpdatePolicy {
  readonly name: 'admin_only' | 'self_service';
  /** What can be decided before the request body is read (REST answers 403 before validating). */
  assertCaller(actor: Actor): void;
  /** The full decision, on the target and the fields sent (present, even if unchanged). */
  assertMayUpdate(actor: Actor, userId: string, fields: ReadonlySet<UserField>): void;
}

export const ADMIN_ONLY_UPDATE: UserUpdatePolicy = {
  name: 'admin_only',
  assertCaller(actor) {
    if (!isAdmin(actor)) throw forbidden('Only an admin may change users through this API.');
  },
  assertMayUpdate(actor) {
    this.assertCaller(actor);
  },
};

export const SELF_SERVICE_UPDATE: UserUpdatePolicy = {
  name: 'self_service',
  assertCaller() {},
  assertMayUpdate(actor, userId, fields) {
    if (isAdmin(actor)) return;
    if (actor.kind !== 'user' || actor.id !== userId)
      throw forbidden('Only an admin may change another user.');
    if (fields.has('role')) throw forbidden('Only an admin may change a role.');
  },
};

/** Soft-deleting a user: admins (and the operator through the CLI, as the system actor). */
export function assertMayDeleteUser(actor: Actor): void {
  if (!isAdmin(actor)) throw forbidden('Only an admin may delete a user.');
}
