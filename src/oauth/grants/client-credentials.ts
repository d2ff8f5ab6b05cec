import { UnauthorizedClient } from '../errors.js';
import { overlappingScope } from '../scope.js';
import type { GrantHandler } from './types.js';

/** RFC 6749 §4.4: a confidential client acting for itself; `sub` is the client id. No refresh token. */
export const clientCredentialsGrant: GrantHandler = async ({ oauth, request, params }) => {
  const { client, method } = await oauth.clientAuth.authenticate(request, params, { allowPublic: true });
  if (method === 'none' || !client.grantTypes.includes('client_credentials')) {
    throw new UnauthorizedClient('This client may not use the client_credentials grant.');
  }
  const scope = overlappingScope(params.single('scope'), client.scopes);
  const issued = await oauth.tokens.issue({ subject: client.id, clientId: client.id, scope });
  return {
    access_token: issued.token,
    token_type: 'Bearer',
    expires_in: issued.expiresIn,
    scope: scope.join(' '),
  };
};
