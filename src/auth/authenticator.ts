import { DomainError } from '../domain/errors.js';
import type { RequestUsers } from '../domain/request-users.js';
import type { ApiKeyService } from './api-keys.js';
import type { Principal } from './principal.js';

/** Turns a bearer token into a caller. The token server issue provides the real one. */
export interface BearerVerifier {
  verify(token: string): Promise<Principal>;
}

/** Until a token server is configured, every bearer token is refused. */
export const refuseAllBearer: BearerVerifier = {
  async verify() {
    throw bearerError('invalid_token', 'The access token is not valid.');
  },
};

export function bearerError(code: 'invalid_token' | 'token_expired', message: string): DomainError {
  const description = message.replace(/"/g, "'");
  return new DomainError(code, message, [], {
    wwwAuthenticate: `Bearer error="invalid_token", error_description="${description}"`,
  });
}

export interface Credentials {
  authorization?: string | undefined;
  apiKey?: string | undefined;
}

/**
 * The one caller step every surface uses. Returns null when no credentials were sent; throws a
 * DomainError (invalid_api_key, invalid_token, token_expired) when they were sent and are bad.
 */
export class Authenticator {
  constructor(
    private readonly apiKeys: ApiKeyService,
    private bearer: BearerVerifier = refuseAllBearer,
  ) {}

  useBearerVerifier(verifier: BearerVerifier): void {
    this.bearer = verifier;
  }

  /** `seen`, when given, remembers the users authentication read (see RequestUsers). */
  async authenticate(credentials: Credentials, seen?: RequestUsers): Promise<Principal | null> {
    const apiKey = credentials.apiKey?.trim();
    if (apiKey) return this.apiKeys.resolve(apiKey, seen);
    const authorization = credentials.authorization?.trim();
    if (!authorization) return null;
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw bearerError('invalid_token', 'The Authorization header must be "Bearer <token>".');
    const token = match[1]!;
    if (token.length > 8192) throw bearerError('invalid_token', 'The access token is not valid.');
    return this.bearer.verify(token);
  }
}

/** The 401 for a request that sent no credentials at all. */
export function missingCredentials(): DomainError {
  return new DomainError(
    'unauthenticated',
    'Authentication required: send X-API-Key or Authorization: Bearer <token>.',
    [],
    {
      wwwAuthenticate: 'Bearer',
    },
  );
}
