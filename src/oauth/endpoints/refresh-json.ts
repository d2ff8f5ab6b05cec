import type { FastifyInstance } from 'fastify';
import type { Services } from '../../compose.js';
import { InvalidRequest } from '../errors.js';
import { rotateRefreshToken } from '../grants/refresh-token.js';
import { noStore, Params } from '../http.js';
import type { OAuth } from '../service.js';

/**
 * POST /oauth/token/refresh: the spec's JSON door to the same rotation as the refresh_token
 * grant. Answers exactly `{ access_token, refresh_token, token_type, expires_in }`.
 */
export function registerRefreshJsonEndpoint(app: FastifyInstance, services: Services, oauth: OAuth): void {
  app.post('/oauth/token/refresh', { schema: { hide: true } }, async (request, reply) => {
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidRequest('The body must be a JSON object { refresh_token, client_id }.');
    }
    const { refresh_token: token, client_id: clientId } = body as Record<string, unknown>;
    if (typeof token !== 'string' || token === '')
      throw new InvalidRequest('refresh_token must be a non-empty string.');
    if (typeof clientId !== 'string' || clientId === '')
      throw new InvalidRequest('client_id must be a non-empty string.');
    const params = Params.fromRecord({ client_id: clientId });
    const { client } = await oauth.clientAuth.authenticate(request, params, {
      allowPublic: true,
      nameSuffices: true,
    });
    const result = await rotateRefreshToken(oauth, services.core.users, client, token, undefined);
    return noStore(reply).type('application/json; charset=utf-8').send({
      access_token: result.access_token,
      refresh_token: result.refresh_token,
      token_type: 'Bearer',
      expires_in: result.expires_in,
    });
  });
}
