import { DomainError } from '../../domain/errors.js';
import type { UserService } from '../../domain/users.js';
import type { Role } from '../../store/types.js';
import { InvalidGrant } from '../errors.js';
import { grantableBy } from '../scope.js';
import type { OAuth } from '../service.js';
import type { TokenResponse } from './types.js';

/** The grant's user's current role; a deleted user ends the grant (its family is revoked). */
export async function liveUserRole(
  oauth: OAuth,
  users: UserService,
  userId: string,
  familyId: string,
  status: 400 | 401,
): Promise<Role> {
  try {
    return (await users.get(userId)).role;
  } catch (err) {
    if (err instanceof DomainError && err.code === 'not_found') {
      await oauth.refresh.revokeFamily(familyId, 'user_deleted');
      throw new InvalidGrant('The user of this grant no longer exists.', status);
    }
    throw err;
  }
}

/**
 * The token response of a grant that acts for a user: the access token carries only what the
 * user's current role still allows, so a demoted user's grant shrinks at the next exchange.
 */
export async function userTokens(
  oauth: OAuth,
  users: UserService,
  grant: {
    userId: string;
    familyId: string;
    clientId: string;
    scope: readonly string[];
    refreshToken: string;
  },
  status: 400 | 401,
): Promise<TokenResponse> {
  const role = await liveUserRole(oauth, users, grant.userId, grant.familyId, status);
  const scope = grantableBy(role, grant.scope);
  const issued = await oauth.tokens.issue({
    subject: grant.userId,
    clientId: grant.clientId,
    scope,
    grantId: grant.familyId,
  });
  return {
    access_token: issued.token,
    token_type: 'Bearer',
    expires_in: issued.expiresIn,
    refresh_token: grant.refreshToken,
    scope: scope.join(' '),
  };
}
