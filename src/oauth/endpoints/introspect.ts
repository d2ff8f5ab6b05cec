import type { FastifyInstance } from 'fastify';
import { InvalidClient } from '../errors.js';
import { formParams, noStore } from '../http.js';
import type { OAuth } from '../service.js';

/**
 * POST /oauth/introspect (RFC 7662). Only an authenticated confidential client (a resource
 * server is registered as one) may ask; an inactive token, of whatever kind, is `{ active: false }`
 * and nothing more.
 */
export function registerIntrospectionEndpoint(app: FastifyInstance, oauth: OAuth): void {
  app.post('/oauth/introspect', { schema: { hide: true } }, async (request, reply) => {
    const params = formParams(request);
    const { method } = await oauth.clientAuth.authenticate(request, params, { allowPublic: false });
    if (method !== 'client_secret_basic') throw new InvalidClient('Client authentication is required.');
    const token = params.require('token');
    const active = await oauth.introspector.introspect(token);
    noStore(reply).type('application/json; charset=utf-8');
    if (!active) return reply.send({ active: false });
    const { claims } = active;
    return reply.send({
      active: true,
      scope: claims.scope.join(' '),
      client_id: claims.client_id,
      sub: claims.sub,
      exp: claims.exp,
      iat: claims.iat,
      iss: claims.iss,
      aud: claims.aud,
      jti: claims.jti,
      token_type: 'Bearer',
    });
  });
}
