import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onRequestAsyncHookHandler,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Services } from '../../../compose.js';
import { toActor } from '../../../auth/principal.js';
import type { Scope } from '../../../auth/scopes.js';
import type { Actor } from '../../../domain/actor.js';
import { missingCredentials } from '../../../auth/authenticator.js';
import type { ApiVersion } from './versions.js';

export type OrdersApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** Everything a route file needs: the typed app, the services and the version it serves. */
export interface RouteContext {
  app: OrdersApp;
  services: Services;
  version: ApiVersion;
}

export function actorOf(request: FastifyRequest): Actor {
  if (!request.principal) throw missingCredentials();
  return toActor(request.principal);
}

/**
 * Authentication and scope run on request, before the body is parsed and validated: a caller
 * without credentials gets 401 (and one without the scope 403) whatever it sent.
 */
export function authOn(services: Services, scope: Scope): onRequestAsyncHookHandler {
  return services.httpAuth.required(scope);
}

/**
 * OpenAPI metadata shared by every order route. No `security` here: the document takes it from the
 * route's caller step (authOn), with the scope that step enforces (src/http/docs/security.ts).
 * `operationId` is the v2 name; the v1 copy of the route gets it with `V1` appended (docs/rest.md).
 */
export function docs(version: ApiVersion, operationId: string, summary: string, description?: string) {
  return {
    tags: [version.deprecated ? 'orders (v1, deprecated)' : 'orders'],
    operationId: versionedOperationId(version.name, operationId),
    summary,
    ...(description ? { description } : {}),
    ...(version.deprecated ? { deprecated: true } : {}),
  };
}

/** The convention of docs/rest.md: an operation's v1 copy is named as its v2 one plus `V1`. */
export const versionedOperationId = (version: 'v1' | 'v2', name: string): string =>
  version === 'v1' ? `${name}V1` : name;

/** Adds names to Vary without dropping what other steps (CORS) put there. */
export function addVary(reply: FastifyReply, ...names: string[]): void {
  const current = reply.getHeader('vary');
  const existing = (Array.isArray(current) ? current.join(',') : String(current ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const lower = new Set(existing.map((s) => s.toLowerCase()));
  for (const n of names) if (!lower.has(n.toLowerCase())) existing.push(n);
  reply.header('vary', existing.join(', '));
}

/** A request header as one string; repeated headers are joined as HTTP joins list values. */
export const headerText = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};
