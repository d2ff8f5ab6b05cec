import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Authenticator } from '../auth/authenticator.js';
import { missingCredentials } from '../auth/authenticator.js';
import type { Principal } from '../auth/principal.js';
import type { Scope } from '../auth/scopes.js';
import { requireScope } from '../auth/scopes.js';
import { DomainError } from '../domain/errors.js';
import { RequestUsers } from '../domain/request-users.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    /** Users authentication read for this request (an API key's user): see RequestUsers. */
    users: RequestUsers | null;
  }
}

/** Something that runs once the caller is known (the rate limiter); it may throw a DomainError. */
export type AfterAuthentication = (
  principal: Principal,
  request: FastifyRequest,
  reply: FastifyReply,
) => Promise<void>;

/**
 * The caller step is an onRequest hook: credentials are checked before the body is read, parsed
 * or validated, so a caller without them gets 401 whatever it sent (a bad body, a wrong content
 * type, an oversized one). createHttpApp refuses to boot a route that runs it any later.
 */
export interface HttpAuth {
  /** onRequest hook for routes that need a caller, optionally with a scope. */
  required(scope?: Scope): onRequestAsyncHookHandler;
  /** onRequest hook for routes where a caller is optional. */
  optional(): onRequestAsyncHookHandler;
}

export function headerValue(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The REST face of the one caller step: reads the headers, asks the Authenticator, then runs the
 * post-authentication steps (rate limiting) and the scope check. Routes never parse credentials.
 */
export function httpAuth(authenticator: Authenticator, after: AfterAuthentication[] = []): HttpAuth {
  async function identify(request: FastifyRequest, reply: FastifyReply): Promise<Principal | null> {
    const users = new RequestUsers();
    const principal = await authenticator.authenticate(
      {
        authorization: headerValue(request, 'authorization'),
        apiKey: headerValue(request, 'x-api-key'),
      },
      users,
    );
    request.principal = principal;
    request.users = users;
    if (principal) for (const step of after) await step(principal, request, reply);
    return principal;
  }

  return {
    required(scope) {
      return async (request, reply) => {
        const principal = await identify(request, reply);
        if (!principal) throw missingCredentials();
        if (scope) {
          try {
            requireScope(principal, scope);
          } catch (err) {
            if (err instanceof DomainError && principal.via === 'bearer') {
              reply.header('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
            }
            throw err;
          }
        }
      };
    },
    optional() {
      return async (request, reply) => {
        await identify(request, reply);
      };
    },
  };
}
