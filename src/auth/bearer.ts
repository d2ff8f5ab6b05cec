import type { TokenIntrospector } from '../oauth/introspection.js';
import { TokenRejected } from '../oauth/tokens.js';
import { bearerError, type BearerVerifier } from './authenticator.js';
import type { Principal } from './principal.js';

/**
 * The bearer step of every surface (REST now, GraphQL and gRPC through the same Authenticator):
 * a token with exactly two dots is a JWT checked locally; anything else is opaque and goes to
 * introspection against the store. Either way the answer is a Principal or a 401 error carrying
 * `WWW-Authenticate: Bearer error="invalid_token"`, with `token_expired` for an expired token.
 */
export class OAuthBearerVerifier implements BearerVerifier {
  constructor(private readonly introspector: TokenIntrospector) {}

  async verify(token: string): Promise<Principal> {
    try {
      const { claims, subject } = await this.introspector.inspect(token);
      return {
        id: claims.sub,
        kind: subject.kind,
        role: subject.role,
        scopes: new Set(claims.scope),
        via: 'bearer',
        tier: null,
        apiKeyId: null,
        clientId: claims.client_id ?? null,
        tokenExpiresAt: new Date(claims.exp * 1000),
        rateLimitKey: `sub:${claims.sub}`,
      };
    } catch (err) {
      if (err instanceof TokenRejected) {
        throw bearerError(err.reason === 'expired' ? 'token_expired' : 'invalid_token', err.message);
      }
      throw err;
    }
  }
}
