import type { UserService } from '../../domain/users.js';
import type { OAuthClient } from '../clients.js';
import { InvalidGrant, UnauthorizedClient } from '../errors.js';
import { RefreshRejected } from '../refresh.js';
import { requestedScope } from '../scope.js';
import type { OAuth } from '../service.js';
import { userTokens } from './subject.js';
import type { GrantHandler, TokenResponse } from './types.js';

/**
 * One rotation for both doors: `grant_type=refresh_token` on /oauth/token and the JSON
 * /oauth/token/refresh. Every refusal is 401 with the family handled as the spec's table says.
 */
export async function rotateRefreshToken(
  oauth: OAuth,
  users: UserService,
  client: OAuthClient,
  refreshToken: string,
  scopeParam: string | undefined,
): Promise<TokenResponse> {
  if (!client.grantTypes.includes('refresh_token')) {
    throw new UnauthorizedClient('This client may not use the refresh_token grant.');
  }
  let narrowed: string[] | undefined;
  let rotated;
  try {
    // A narrower scope (RFC 6749 §6) is checked before rotating, so a bad one costs no token.
    rotated = await oauth.refresh.rotate(refreshToken, client.id, (grant) => {
      if (scopeParam !== undefined) narrowed = requestedScope(scopeParam, grant.scope);
    });
  } catch (err) {
    if (err instanceof RefreshRejected) throw new InvalidGrant(err.message, 401);
    throw err;
  }
  return userTokens(
    oauth,
    users,
    {
      userId: rotated.subject,
      familyId: rotated.familyId,
      clientId: client.id,
      scope: narrowed ?? rotated.scope,
      refreshToken: rotated.token,
    },
    401,
  );
}

export const refreshTokenGrant: GrantHandler = async ({ oauth, users, request, params }) => {
  const { client } = await oauth.clientAuth.authenticate(request, params, { allowPublic: true });
  const token = params.require('refresh_token');
  return rotateRefreshToken(oauth, users, client, token, params.single('scope'));
};
