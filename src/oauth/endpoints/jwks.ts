import type { FastifyInstance } from 'fastify';
import { JWKS_MAX_AGE_SECONDS } from '../keys.js';
import type { OAuth } from '../service.js';

/** GET /.well-known/jwks.json: the published public keys, cacheable for the max-age keys wait for. */
export function registerJwksEndpoint(app: FastifyInstance, oauth: OAuth): void {
  app.get('/.well-known/jwks.json', { schema: { hide: true } }, async (_request, reply) => {
    const body = await oauth.jwks();
    return reply
      .header('Cache-Control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`)
      .type('application/jwk-set+json; charset=utf-8')
      .send(body);
  });
}
