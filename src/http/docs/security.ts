import type { onRequestAsyncHookHandler } from 'fastify';
import { ALL_SCOPES, SCOPE_DESCRIPTIONS, type Scope } from '../../auth/scopes.js';
import type { HttpAuth } from '../auth.js';

/** What a caller step enforces, attached to the step itself so the docs describe what really runs. */
export interface AuthTag {
  scope: Scope | null;
  optional: boolean;
}

const AUTH_TAG = Symbol.for('atrium.docs.auth');

type Tagged = onRequestAsyncHookHandler & { [AUTH_TAG]?: AuthTag };

/**
 * Wraps the REST caller step so every hook it hands out carries its scope. The OpenAPI
 * generator reads the tag; route authors need not repeat the security of each route by hand.
 */
export function documentedAuth(auth: HttpAuth): HttpAuth {
  const tag = (handler: onRequestAsyncHookHandler, value: AuthTag) =>
    Object.assign(handler, { [AUTH_TAG]: value }) as onRequestAsyncHookHandler;
  return {
    required: (scope) => tag(auth.required(scope), { scope: scope ?? null, optional: false }),
    optional: () => tag(auth.optional(), { scope: null, optional: true }),
  };
}

/** The caller step among a route's hooks, if it has one. */
export function findAuthTag(route: Record<string, unknown>): AuthTag | undefined {
  for (const hook of ['onRequest', 'preParsing', 'preValidation', 'preHandler']) {
    const value = route[hook];
    const handlers = Array.isArray(value) ? value : value ? [value] : [];
    for (const h of handlers as Tagged[]) if (typeof h === 'function' && h[AUTH_TAG]) return h[AUTH_TAG];
  }
  return undefined;
}

/**
 * The hook a route runs the caller step in, when that is later than onRequest (after the body
 * has been parsed and validated): a route declared so would answer a caller without credentials
 * 400 or 415 instead of 401.
 */
export function authStepTooLate(route: Record<string, unknown>): string | undefined {
  for (const hook of ['preParsing', 'preValidation', 'preHandler']) {
    const value = route[hook];
    const handlers = Array.isArray(value) ? value : value ? [value] : [];
    for (const h of handlers as Tagged[]) if (typeof h === 'function' && h[AUTH_TAG]) return hook;
  }
  return undefined;
}

export const SCHEME = {
  apiKey: 'apiKey',
  bearer: 'bearerAuth',
  oauth2: 'oauth2',
  client: 'clientBasic',
} as const;

export type SecurityRequirement = Record<string, string[]>;

/** Any one of the three caller schemes; the scope applies to tokens (a key carries its role's scopes). */
export function securityFor(tag: AuthTag): SecurityRequirement[] {
  const scopes = tag.scope ? [tag.scope] : [];
  const schemes: SecurityRequirement[] = [
    { [SCHEME.apiKey]: [] },
    { [SCHEME.bearer]: scopes },
    { [SCHEME.oauth2]: scopes },
  ];
  return tag.optional ? [{}, ...schemes] : schemes;
}

export function securitySchemes(authUrl: string): Record<string, unknown> {
  const scopes = Object.fromEntries(ALL_SCOPES.map((s) => [s, SCOPE_DESCRIPTIONS[s]]));
  const tokenUrl = `${authUrl}/oauth/token`;
  return {
    [SCHEME.apiKey]: {
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
      description:
        "An API key such as `atr_live_<32 hex>_<6 hex>`. It carries every scope of its user's role and its tier sets the rate limit.",
    },
    [SCHEME.bearer]: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description:
        'An access token from the token server. Failures answer 401 with `WWW-Authenticate: Bearer`.',
    },
    [SCHEME.oauth2]: {
      type: 'oauth2',
      description: 'OAuth 2.1: authorization code with PKCE (S256), or client credentials.',
      flows: {
        authorizationCode: {
          authorizationUrl: `${authUrl}/authorize`,
          tokenUrl,
          refreshUrl: tokenUrl,
          scopes,
        },
        clientCredentials: { tokenUrl, scopes },
      },
    },
    [SCHEME.client]: {
      type: 'http',
      scheme: 'basic',
      description: 'OAuth client authentication at the token server: `client_id:client_secret`.',
    },
  };
}
