import type { FastifyInstance } from 'fastify';
import { ALL_SCOPES } from '../../auth/scopes.js';
import type { OAuth } from '../service.js';

/** GET /.well-known/oauth-authorization-server (RFC 8414). */
export function registerMetadataEndpoint(app: FastifyInstance, oauth: OAuth): void {
  const issuer = oauth.config.authUrl;
  const metadata = {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    ...(oauth.signingKeys ? { jwks_uri: `${issuer}/.well-known/jwks.json` } : {}),
    scopes_supported: [...ALL_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'client_credentials', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic'],
    authorization_response_iss_parameter_supported: true,
  };
  app.get('/.well-known/oauth-authorization-server', { schema: { hide: true } }, async (_request, reply) =>
    reply.header('Cache-Control', 'public, max-age=3600').send(metadata),
  );
}
