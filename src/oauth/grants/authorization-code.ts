import { CodeRejected } from '../codes.js';
import { InvalidGrant, InvalidRequest, UnauthorizedClient } from '../errors.js';
import { isValidVerifier } from '../pkce.js';
import { userTokens } from './subject.js';
import type { GrantHandler } from './types.js';

/** RFC 6749 §4.1.3 with PKCE (RFC 7636 §4.5) required for every client. */
export const authorizationCodeGrant: GrantHandler = async ({ oauth, users, request, params }) => {
  const { client } = await oauth.clientAuth.authenticate(request, params, { allowPublic: true });
  if (!client.grantTypes.includes('authorization_code')) {
    throw new UnauthorizedClient('This client may not use the authorization_code grant.');
  }
  const code = params.require('code');
  const redirectUri = params.require('redirect_uri');
  const verifier = params.single('code_verifier');
  if (verifier === undefined) throw new InvalidRequest('The code_verifier parameter is required (PKCE).');
  if (!isValidVerifier(verifier)) {
    throw new InvalidRequest(
      'The code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, "-", ".", "_" and "~".',
    );
  }
  let redeemed;
  try {
    redeemed = await oauth.codes.redeem({ code, clientId: client.id, redirectUri, codeVerifier: verifier });
  } catch (err) {
    if (err instanceof CodeRejected) throw new InvalidGrant(err.message);
    throw err;
  }
  return userTokens(
    oauth,
    users,
    {
      userId: redeemed.userId,
      familyId: redeemed.familyId,
      clientId: client.id,
      scope: redeemed.scope,
      refreshToken: redeemed.refreshToken,
    },
    400,
  );
};
