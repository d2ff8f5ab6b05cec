import type { UserService } from '../domain/users.js';
import { DomainError } from '../domain/errors.js';
import type { Role } from '../store/types.js';
import type { ClientService } from './clients.js';
import type { RefreshTokens } from './refresh.js';
import { grantableBy } from './scope.js';
import { TokenRejected, type AccessClaims, type AccessTokens } from './tokens.js';

export interface TokenSubject {
  kind: 'user' | 'client';
  role: Role | null;
}

export interface ActiveToken {
  claims: AccessClaims;
  subject: TokenSubject;
}

/**
 * Decides whether an access token is active, for the bearer check of every surface and for the
 * introspection endpoint alike: a JWT is checked locally, then against the store for what a
 * signature cannot tell (the grant revoked, the user deleted, the client revoked). Opaque strings
 * are looked up in the store; this server issues no opaque access tokens, so none is ever active.
 */
export class TokenIntrospector {
  constructor(
    private readonly tokens: AccessTokens,
    private readonly refresh: RefreshTokens,
    private readonly clients: ClientService,
    private readonly users: UserService,
  ) {}

  static isJwtShaped(token: string): boolean {
    return token.split('.').length === 3;
  }

  /** The active token, or throws TokenRejected saying why not. */
  async inspect(token: string): Promise<ActiveToken> {
    if (!TokenIntrospector.isJwtShaped(token)) return this.inspectOpaque(token);
    const claims = await this.tokens.verify(token);
    const subject = await this.liveSubject(claims);
    // The role is the user's now, not when the token was issued: a user demoted to viewer keeps
    // only what a viewer may grant, as their API keys do, for the rest of the token's life.
    if (subject.role === null) return { claims, subject };
    return { claims: { ...claims, scope: grantableBy(subject.role, claims.scope) }, subject };
  }

  /** RFC 7662 view: the token, or null for anything inactive. */
  async introspect(token: string): Promise<ActiveToken | null> {
    try {
      return await this.inspect(token);
    } catch (err) {
      if (err instanceof TokenRejected) return null;
      throw err;
    }
  }

  private async inspectOpaque(token: string): Promise<never> {
    if (await this.refresh.isKnownToken(token)) {
      throw new TokenRejected('invalid', 'A refresh token cannot be used as an access token.');
    }
    throw new TokenRejected('invalid', 'The access token is not valid.');
  }

  private async liveSubject(claims: AccessClaims): Promise<TokenSubject> {
    if (claims.sid !== undefined && !(await this.refresh.isFamilyActive(claims.sid))) {
      throw new TokenRejected('invalid', 'The access token has been revoked.');
    }
    // RFC 9068 §2.2: a client acting for itself is its own subject.
    if (claims.client_id !== undefined && claims.sub === claims.client_id) {
      const client = await this.clients.get(claims.sub);
      if (!client)
        throw new TokenRejected('invalid', 'The client of this access token is no longer registered.');
      return { kind: 'client', role: null };
    }
    try {
      const user = await this.users.get(claims.sub);
      return { kind: 'user', role: user.role };
    } catch (err) {
      if (err instanceof DomainError && err.code === 'not_found') {
        throw new TokenRejected('invalid', 'The user of this access token no longer exists.');
      }
      throw err;
    }
  }
}
