import type { FastifyInstance } from 'fastify';
import type { Services } from '../../compose.js';
import { InvalidRequest, UnsupportedGrantType } from '../errors.js';
import { authorizationCodeGrant } from '../grants/authorization-code.js';
import { clientCredentialsGrant } from '../grants/client-credentials.js';
import { refreshTokenGrant } from '../grants/refresh-token.js';
import type { GrantHandler } from '../grants/types.js';
import { formParams, noStore } from '../http.js';
import type { OAuth } from '../service.js';

const GRANTS: Record<string, GrantHandler> = {
  client_credentials: clientCredentialsGrant,
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
};

/**
 * POST /oauth/token (RFC 6749 §3.2): read the form, pick the grant, let it authenticate the
 * client and issue; the password and implicit flows do not exist here (OAuth 2.1).
 */
export function registerTokenEndpoint(app: FastifyInstance, services: Services, oauth: OAuth): void {
  app.post('/oauth/token', { schema: { hide: true } }, async (request, reply) => {
    const params = formParams(request);
    // RFC 6749 §3.2: no parameter may appear twice, whichever grant reads it.
    if (params.repeated.size > 0)
      throw new InvalidRequest(`Repeated parameters: ${[...params.repeated].join(', ')}.`);
    const grantType = params.require('grant_type');
    const grant = Object.hasOwn(GRANTS, grantType) ? GRANTS[grantType] : undefined;
    if (!grant)
      throw new UnsupportedGrantType(`The grant type ${JSON.stringify(grantType)} is not supported.`);
    const body = await grant({ oauth, users: services.core.users, request, params });
    return noStore(reply).type('application/json; charset=utf-8').send(body);
  });
}
