import { ALL_SCOPES } from '../../auth/scopes.js';
import { SCHEME } from './security.js';

/**
 * The OAuth 2.1 token server in the OpenAPI document.
 *
 * Its routes (src/oauth/endpoints) are registered with `schema: { hide: true }` on purpose: a
 * `body` or `querystring` schema would switch on Fastify's validation (REST-style error bodies
 * instead of RFC 6749 ones) and a `response` schema would switch on fast-json-stringify (which
 * drops undeclared fields). So the routes carry no schema and this file describes them instead:
 * the docs module's swagger `transform` swaps these operations in for the hidden schemas, keyed by
 * method and URL, and nothing here ever reaches a validator or a serializer. Only routes that are
 * really registered get documented, so a process without the `auth` role lists none of them.
 */

type Json = Record<string, unknown>;

export const TOKEN_SERVER_TAG = {
  name: 'oauth',
  description:
    'The OAuth 2.1 token server at `AUTH_URL` (RFC 6749, 7636, 7662, 8414, 9068, 9207). Its errors are ' +
    'the RFC 6749 body `{ error, error_description }`, not the REST `ErrorBody`. Failed client ' +
    'authentications and sign-ins are limited per client or account and per source address.',
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const SCOPE_STRING = {
  type: 'string',
  description: `Space-delimited scopes, any of: ${ALL_SCOPES.map((s) => `\`${s}\``).join(', ')}.`,
  examples: ['orders:read profile:read'],
};

const CLIENT_ID = { type: 'string', description: 'The client identifier.' };

/** Shared schemas, added to `components.schemas`. */
export const TOKEN_SERVER_SCHEMAS: Record<string, Json> = {
  OAuthErrorBody: {
    type: 'object',
    description: 'RFC 6749 §5.2 error body, used by every token-server endpoint that answers JSON.',
    required: ['error', 'error_description'],
    properties: {
      error: {
        type: 'string',
        description:
          'An RFC 6749 / RFC 7662 error code, or `rate_limit_exceeded` when too many attempts failed.',
        enum: [
          'invalid_request',
          'invalid_client',
          'invalid_grant',
          'unauthorized_client',
          'unsupported_grant_type',
          'invalid_scope',
          'rate_limit_exceeded',
          'server_error',
        ],
      },
      error_description: {
        type: 'string',
        description: 'Human-readable, printable ASCII without `"` and `\\`.',
      },
    },
    additionalProperties: false,
  },
  OAuthTokenResponse: {
    type: 'object',
    description: 'RFC 6749 §5.1 token response. The access token is an RS256 (or HS256) JWT (RFC 9068).',
    required: ['access_token', 'token_type', 'expires_in', 'scope'],
    properties: {
      access_token: { type: 'string', description: 'A JWT access token (`typ: at+jwt`).' },
      token_type: { type: 'string', const: 'Bearer' },
      expires_in: { type: 'integer', description: 'Lifetime in seconds (900).', examples: [900] },
      refresh_token: {
        type: 'string',
        description:
          'An opaque `art_…` refresh token, for the authorization-code and refresh grants only (never for ' +
          'client credentials). Each use rotates it; reusing a rotated one revokes the whole grant.',
      },
      scope: SCOPE_STRING,
    },
    additionalProperties: false,
  },
  OAuthClientCredentialsRequest: {
    type: 'object',
    description:
      'RFC 6749 §4.4. A confidential client authenticated with HTTP Basic acts for itself; no refresh token.',
    required: ['grant_type'],
    properties: {
      grant_type: { type: 'string', const: 'client_credentials' },
      scope: { ...SCOPE_STRING, description: 'Omitted: every scope the client may have.' },
    },
  },
  OAuthAuthorizationCodeRequest: {
    type: 'object',
    description:
      'RFC 6749 §4.1.3 with PKCE (RFC 7636). Confidential clients authenticate with HTTP Basic, public ' +
      'clients send `client_id`. A code is single-use and lives 60 seconds; a second exchange fails and ' +
      'revokes what the first one issued.',
    required: ['grant_type', 'code', 'redirect_uri', 'code_verifier'],
    properties: {
      grant_type: { type: 'string', const: 'authorization_code' },
      code: { type: 'string', description: 'The code from the redirect of `/authorize`.' },
      redirect_uri: { type: 'string', description: 'Exactly the redirect URI of the authorization request.' },
      code_verifier: {
        type: 'string',
        description: 'The PKCE verifier whose S256 hash was the `code_challenge`.',
        pattern: '^[A-Za-z0-9._~-]{43,128}$',
      },
      client_id: {
        ...CLIENT_ID,
        description: 'Public clients only; must match the Basic id if both are sent.',
      },
    },
  },
  OAuthRefreshTokenRequest: {
    type: 'object',
    description:
      'RFC 6749 §6. Rotates the refresh token; a narrower `scope` may be asked for. Confidential clients ' +
      'authenticate with HTTP Basic, public clients send `client_id`. Every refusal is 401 `invalid_grant`.',
    required: ['grant_type', 'refresh_token'],
    properties: {
      grant_type: { type: 'string', const: 'refresh_token' },
      refresh_token: { type: 'string' },
      scope: { ...SCOPE_STRING, description: 'At most the scope of the grant; omitted keeps it.' },
      client_id: {
        ...CLIENT_ID,
        description: 'Public clients only; must match the Basic id if both are sent.',
      },
    },
  },
  OAuthRefreshJsonRequest: {
    type: 'object',
    required: ['refresh_token', 'client_id'],
    properties: {
      refresh_token: { type: 'string', minLength: 1 },
      client_id: { type: 'string', minLength: 1, description: 'The client the refresh token was issued to.' },
    },
  },
  OAuthRefreshJsonResponse: {
    type: 'object',
    required: ['access_token', 'refresh_token', 'token_type', 'expires_in'],
    properties: {
      access_token: { type: 'string', description: 'A JWT access token (`typ: at+jwt`).' },
      refresh_token: {
        type: 'string',
        description: 'The rotated refresh token; the one sent is now used up.',
      },
      token_type: { type: 'string', const: 'Bearer' },
      expires_in: { type: 'integer', examples: [900] },
    },
    additionalProperties: false,
  },
  OAuthIntrospectionRequest: {
    type: 'object',
    required: ['token'],
    properties: {
      token: { type: 'string', description: 'The token to check.' },
      token_type_hint: { type: 'string', description: 'Accepted and ignored.' },
    },
  },
  OAuthIntrospectionResponse: {
    description:
      'RFC 7662 §2.2. Only this server’s live access tokens are active; anything else (expired, revoked, ' +
      'a refresh token, garbage) is `{ "active": false }` and nothing more.',
    oneOf: [
      {
        type: 'object',
        title: 'Active',
        required: ['active', 'scope', 'sub', 'exp', 'iat', 'iss', 'aud', 'token_type'],
        properties: {
          active: { type: 'boolean', const: true },
          scope: SCOPE_STRING,
          client_id: { type: 'string' },
          sub: { type: 'string', description: 'The user, or the client itself for client credentials.' },
          exp: { type: 'integer' },
          iat: { type: 'integer' },
          iss: { type: 'string' },
          aud: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
          jti: { type: 'string', description: 'On every token this server issues.' },
          token_type: { type: 'string', const: 'Bearer' },
        },
        additionalProperties: false,
      },
      {
        type: 'object',
        title: 'Inactive',
        required: ['active'],
        properties: { active: { type: 'boolean', const: false } },
        additionalProperties: false,
      },
    ],
  },
  JsonWebKeySet: {
    type: 'object',
    description:
      'RFC 7517 key set: public members only. Empty (`{ "keys": [] }`) when tokens are signed with HS256.',
    required: ['keys'],
    properties: {
      keys: {
        type: 'array',
        items: {
          type: 'object',
          required: ['kty', 'n', 'e', 'kid', 'alg', 'use'],
          properties: {
            kty: { type: 'string', const: 'RSA' },
            n: { type: 'string', description: 'Modulus, base64url.' },
            e: { type: 'string', description: 'Exponent, base64url.' },
            kid: { type: 'string', description: 'The RFC 7638 thumbprint of the key.' },
            alg: { type: 'string', const: 'RS256' },
            use: { type: 'string', const: 'sig' },
          },
          additionalProperties: false,
        },
      },
    },
    additionalProperties: false,
  },
  AuthorizationServerMetadata: {
    type: 'object',
    description: 'RFC 8414 metadata. `jwks_uri` is absent when tokens are signed with HS256.',
    required: [
      'issuer',
      'authorization_endpoint',
      'token_endpoint',
      'introspection_endpoint',
      'scopes_supported',
      'response_types_supported',
      'response_modes_supported',
      'grant_types_supported',
      'code_challenge_methods_supported',
      'token_endpoint_auth_methods_supported',
      'introspection_endpoint_auth_methods_supported',
      'authorization_response_iss_parameter_supported',
    ],
    properties: {
      issuer: { type: 'string', format: 'uri' },
      authorization_endpoint: { type: 'string', format: 'uri' },
      token_endpoint: { type: 'string', format: 'uri' },
      introspection_endpoint: { type: 'string', format: 'uri' },
      jwks_uri: { type: 'string', format: 'uri' },
      scopes_supported: { type: 'array', items: { type: 'string', enum: [...ALL_SCOPES] } },
      response_types_supported: { type: 'array', items: { type: 'string', const: 'code' } },
      response_modes_supported: { type: 'array', items: { type: 'string', const: 'query' } },
      grant_types_supported: {
        type: 'array',
        items: { type: 'string', enum: ['authorization_code', 'client_credentials', 'refresh_token'] },
      },
      code_challenge_methods_supported: { type: 'array', items: { type: 'string', const: 'S256' } },
      token_endpoint_auth_methods_supported: {
        type: 'array',
        items: { type: 'string', enum: ['client_secret_basic', 'none'] },
      },
      introspection_endpoint_auth_methods_supported: {
        type: 'array',
        items: { type: 'string', const: 'client_secret_basic' },
      },
      authorization_response_iss_parameter_supported: { type: 'boolean', const: true },
    },
    additionalProperties: false,
  },
  OAuthAuthorizeForm: {
    type: 'object',
    description:
      'The login or consent form. The authorization-request parameters travel as hidden fields (a ' +
      'parameter only in the query string of the POST is taken from there). A non-browser client may post ' +
      '`username`, `password` and `consent=approve` in one step (decisions §4).',
    required: ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method'],
    properties: {
      response_type: { type: 'string', const: 'code' },
      client_id: CLIENT_ID,
      redirect_uri: { type: 'string' },
      scope: SCOPE_STRING,
      state: { type: 'string', maxLength: 2048 },
      code_challenge: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
      code_challenge_method: { type: 'string', const: 'S256' },
      username: { type: 'string', maxLength: 320, description: 'Handle or email.' },
      password: { type: 'string', maxLength: 1024, format: 'password' },
      consent: {
        type: 'string',
        enum: ['approve', 'deny'],
        description:
          '`deny` redirects with `access_denied`; `approve` grants without showing the consent page.',
      },
      csrf_token: {
        type: 'string',
        description:
          'From the rendered form; required when the browser sent Origin, Sec-Fetch-Site or the cookie.',
      },
      login_ticket: {
        type: 'string',
        description: 'From the consent page: the signed proof of the sign-in, used instead of the password.',
      },
    },
  },
};

const NO_STORE_HEADERS = {
  'Cache-Control': { type: 'string', const: 'no-store' },
  Pragma: { type: 'string', const: 'no-cache' },
};

const json = (schema: string) => ({ content: { 'application/json': { schema: ref(schema) } } });

const oauthError = (description: string, headers: Json = {}): Json => ({
  description,
  headers: { ...NO_STORE_HEADERS, ...headers },
  ...json('OAuthErrorBody'),
});

const TOO_MANY = oauthError(
  '`rate_limit_exceeded`: too many failed client authentications for this client or source address ' +
    '(10 per client, 30 per address in 5 minutes). Refused even with correct credentials until then.',
  { 'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds until a new attempt is counted.' } },
);
const TOO_LARGE = oauthError('`invalid_request`: the body is larger than 16 KiB.');
const SERVER_ERROR = oauthError('`server_error`.');
const WWW_BASIC = {
  'WWW-Authenticate': { type: 'string', description: '`Basic realm="atrium", charset="UTF-8"`.' },
};
const WWW_BASIC_ON_INVALID_CLIENT = {
  'WWW-Authenticate': {
    type: 'string',
    description:
      '`Basic realm="atrium", charset="UTF-8"` for `invalid_client`; absent for `invalid_grant` ' +
      '(a refused refresh token is a dead grant, not a credential to retry: RFC 6749 §5.2).',
  },
};

const FORM = 'application/x-www-form-urlencoded';

/** Client authentication: HTTP Basic for confidential clients, none (a `client_id`) for public ones. */
const BASIC_OR_NONE = [{ [SCHEME.client]: [] }, {}];

const PAGE_HEADERS = {
  'Content-Security-Policy': {
    type: 'string',
    description:
      "`default-src 'none'; style-src 'self'; form-action 'self' <redirect origin>; frame-ancestors 'none'; base-uri 'none'`.",
  },
  'Cache-Control': { type: 'string', const: 'no-store' },
  Pragma: { type: 'string', const: 'no-cache' },
  'Referrer-Policy': { type: 'string', const: 'same-origin' },
};
const FORM_PAGE_HEADERS = {
  ...PAGE_HEADERS,
  'Set-Cookie': {
    type: 'string',
    description:
      'The CSRF cookie `atrium_csrf` (HttpOnly, SameSite=Strict) the form’s `csrf_token` is bound to.',
  },
};
const html = (description: string, headers: Json = PAGE_HEADERS): Json => ({
  description,
  headers,
  content: { 'text/html': { schema: { type: 'string' } } },
});
const ERROR_PAGE = (what: string) => html(`Error page, never a redirect: ${what}`);
const PAGE_SERVER_ERROR = html('Error page: something failed on the server.');

const redirectTo = (description: string): Json => ({
  description,
  type: 'null',
  headers: {
    Location: {
      type: 'string',
      format: 'uri',
      description: 'The registered redirect URI with the response in its query.',
    },
    'Cache-Control': { type: 'string', const: 'no-store' },
    'Referrer-Policy': { type: 'string', const: 'no-referrer' },
  },
});

const AUTHORIZE_QUERY = {
  type: 'object',
  required: ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method'],
  properties: {
    response_type: { type: 'string', const: 'code', description: 'Only `code` (no implicit flow).' },
    client_id: { type: 'string', description: 'A registered client. Unknown: error page.' },
    redirect_uri: {
      type: 'string',
      description: 'One of the client’s registered URIs, compared as exact strings. Otherwise: error page.',
    },
    code_challenge: {
      type: 'string',
      pattern: '^[A-Za-z0-9_-]{43}$',
      description: 'PKCE: base64url SHA-256 of the verifier (RFC 7636). Required for every client.',
    },
    code_challenge_method: { type: 'string', const: 'S256', description: '`plain` is refused.' },
    scope: { ...SCOPE_STRING, description: 'Space-delimited; omitted: everything the client may have.' },
    state: { type: 'string', maxLength: 2048, description: 'Returned unchanged in the redirect.' },
    response_mode: { type: 'string', const: 'query', description: 'Only `query`.' },
  },
};

const AUTHORIZE_REDIRECT_ERROR =
  'with `error` (`invalid_request`, `unsupported_response_type`, `unauthorized_client`, `invalid_scope`), ' +
  '`error_description`, `state` and `iss`';

/** The documented operations, by `METHOD url` exactly as the routes are registered. */
export const TOKEN_SERVER_OPERATIONS: Record<string, Json> = {
  'POST /oauth/token': {
    operationId: 'requestToken',
    summary: 'Token endpoint: client credentials, authorization code with PKCE, refresh token',
    description:
      'RFC 6749 §3.2. The grant is chosen by `grant_type`; `password` and `implicit` do not exist (OAuth ' +
      '2.1) and are `unsupported_grant_type`. No parameter may be repeated; an empty value counts as ' +
      'absent. Confidential clients authenticate with HTTP Basic (credentials form-urlencoded, RFC 6749 ' +
      '§2.3.1) only: `client_secret` in the body is refused. Public clients send `client_id` instead. ' +
      'Successes and errors carry `Cache-Control: no-store`.',
    security: BASIC_OR_NONE,
    body: {
      content: {
        [FORM]: {
          schema: {
            oneOf: [
              ref('OAuthClientCredentialsRequest'),
              ref('OAuthAuthorizationCodeRequest'),
              ref('OAuthRefreshTokenRequest'),
            ],
            discriminator: {
              propertyName: 'grant_type',
              mapping: {
                client_credentials: '#/components/schemas/OAuthClientCredentialsRequest',
                authorization_code: '#/components/schemas/OAuthAuthorizationCodeRequest',
                refresh_token: '#/components/schemas/OAuthRefreshTokenRequest',
              },
            },
          },
        },
      },
    },
    response: {
      200: { description: 'Tokens issued.', headers: NO_STORE_HEADERS, ...json('OAuthTokenResponse') },
      400: oauthError(
        '`invalid_request` (missing, repeated or malformed parameter, not a form, PKCE verifier missing or ' +
          'malformed), `invalid_grant` (bad, expired or used code; wrong verifier or redirect URI), ' +
          '`unauthorized_client`, `unsupported_grant_type` or `invalid_scope`.',
      ),
      401: oauthError(
        '`invalid_client`: "Client authentication failed." for an unknown client, a wrong secret, a ' +
          'revoked client or a confidential client naming itself without its secret (one answer for these, ' +
          'so they cannot be told apart); "Client authentication is required." when the request carries ' +
          'neither HTTP Basic nor a `client_id`; ' +
          '`client_secret_post` and client assertions are refused with a message naming HTTP Basic. ' +
          '`invalid_grant` for a refused refresh token (unknown, used, expired, revoked).',
        WWW_BASIC_ON_INVALID_CLIENT,
      ),
      413: TOO_LARGE,
      429: TOO_MANY,
      500: SERVER_ERROR,
    },
  },
  'POST /oauth/token/refresh': {
    operationId: 'rotateRefreshToken',
    summary: 'Rotate a refresh token (JSON)',
    description:
      'The JSON door to the same rotation as `grant_type=refresh_token`. The refresh token, bound to its ' +
      'client and rotated with reuse detection, is the credential (RFC 9700 §4.14.2): a confidential ' +
      'client may name itself with `client_id` alone, and HTTP Basic is checked when sent. Presenting a ' +
      'rotated token again revokes the whole family. Parallel refreshes with one token have one winner.',
    security: BASIC_OR_NONE,
    body: { content: { 'application/json': { schema: ref('OAuthRefreshJsonRequest') } } },
    response: {
      200: { description: 'Rotated.', headers: NO_STORE_HEADERS, ...json('OAuthRefreshJsonResponse') },
      400: oauthError(
        '`invalid_request` (not a JSON object, missing or empty `refresh_token` or `client_id`, client_id ' +
          'not matching Basic) or `unauthorized_client`.',
      ),
      401: oauthError(
        '`invalid_client` (unknown client, bad Basic credentials) or `invalid_grant` (refresh token unknown, ' +
          'used, expired, revoked or issued to another client).',
        WWW_BASIC_ON_INVALID_CLIENT,
      ),
      413: oauthError('`invalid_request`: the body is too large.'),
      429: TOO_MANY,
      500: SERVER_ERROR,
    },
  },
  'POST /oauth/introspect': {
    operationId: 'introspectToken',
    summary: 'Token introspection (RFC 7662)',
    description:
      'For resource servers, registered as confidential clients: HTTP Basic is required. An access token ' +
      'that verifies and whose grant, user and client are still live is active; everything else is ' +
      '`{ "active": false }`.',
    security: [{ [SCHEME.client]: [] }],
    body: { content: { [FORM]: { schema: ref('OAuthIntrospectionRequest') } } },
    response: {
      200: {
        description: 'Whether the token is active.',
        headers: NO_STORE_HEADERS,
        ...json('OAuthIntrospectionResponse'),
      },
      400: oauthError('`invalid_request`: not a form, or no `token`.'),
      401: oauthError('`invalid_client`: no or bad client authentication.', WWW_BASIC),
      413: TOO_LARGE,
      429: TOO_MANY,
      500: SERVER_ERROR,
    },
  },
  'GET /.well-known/jwks.json': {
    operationId: 'getJwks',
    summary: 'Public signing keys (JWKS)',
    description:
      'The keys access tokens are verified with, by `kid`. A new key is published at least the max-age ' +
      'ahead of signing, and a retired one stays until its last tokens have expired.',
    security: [],
    response: {
      200: {
        description: 'The published keys.',
        headers: { 'Cache-Control': { type: 'string', const: 'public, max-age=3600' } },
        content: { 'application/jwk-set+json': { schema: ref('JsonWebKeySet') } },
      },
      500: SERVER_ERROR,
    },
  },
  'GET /.well-known/oauth-authorization-server': {
    operationId: 'getAuthorizationServerMetadata',
    summary: 'Authorization server metadata (RFC 8414)',
    description: 'Discovery: endpoints, scopes, grants and methods this server supports.',
    security: [],
    response: {
      200: {
        description: 'The metadata.',
        headers: { 'Cache-Control': { type: 'string', const: 'public, max-age=3600' } },
        ...json('AuthorizationServerMetadata'),
      },
    },
  },
  'GET /authorize': {
    operationId: 'authorize',
    summary: 'Authorization endpoint: start the code flow (login page)',
    description:
      'RFC 6749 §4.1.1 with PKCE S256 required. Checks the request and shows the sign-in page (server-' +
      'rendered HTML, no script). Until the client and redirect URI are proven (unknown client, missing ' +
      'or inexact redirect URI, repeated `client_id` or `redirect_uri`) the answer is an error page and ' +
      'never a redirect; any other bad request redirects to the client with the error (RFC 9207 `iss`).',
    security: [],
    querystring: AUTHORIZE_QUERY,
    response: {
      200: html('The sign-in page.', FORM_PAGE_HEADERS),
      302: redirectTo(`Back to the client ${AUTHORIZE_REDIRECT_ERROR}.`),
      400: ERROR_PAGE('unknown client, missing or unregistered redirect URI, or a repeated one.'),
      500: PAGE_SERVER_ERROR,
    },
  },
  'POST /authorize': {
    operationId: 'submitAuthorization',
    summary: 'Authorization endpoint: sign in and consent',
    description:
      'Posted by the login and consent pages. Runs: check the request → CSRF → deny? → sign in (password, ' +
      'or the consent page’s login ticket) → scope the user’s role allows → consent (skipped for first-' +
      'party clients or with `consent=approve`) → 302 to the redirect URI with `code`, `state` and `iss`. ' +
      'Codes last 60 seconds and are bound to the client, the redirect URI and the PKCE challenge. ' +
      'A POST announcing a foreign `Origin` or `Sec-Fetch-Site` other than `same-origin`, or a browser ' +
      'POST without a valid `csrf_token`, gets the login page again with 403.',
    security: [],
    body: { content: { [FORM]: { schema: ref('OAuthAuthorizeForm') } } },
    response: {
      200: html('The consent page (clients that are not first-party).', FORM_PAGE_HEADERS),
      302: redirectTo(
        'Back to the client with `code`, `state` and `iss`; or with `error` (`access_denied` when the user ' +
          `denied, \`invalid_scope\` when the role allows none of the scopes) or ${AUTHORIZE_REDIRECT_ERROR}.`,
      ),
      400: html(
        'The login page with an error (missing or wrong credentials, expired login ticket), or an error ' +
          'page (not a form; unknown client or unregistered redirect URI).',
        FORM_PAGE_HEADERS,
      ),
      403: html('The login page again: the CSRF check failed.', FORM_PAGE_HEADERS),
      413: ERROR_PAGE('the form is larger than 16 KiB.'),
      429: html(
        'The login page: too many failed sign-ins for this account (10) or address (30) in 5 minutes, ' +
          'refused even with the right password.',
        {
          ...FORM_PAGE_HEADERS,
          'Retry-After': {
            type: 'integer',
            minimum: 1,
            description: 'Seconds until a new attempt is counted.',
          },
        },
      ),
      500: PAGE_SERVER_ERROR,
    },
  },
};

/** The documentation of a token-server route, or undefined for any other route. */
export function tokenServerOperation(method: unknown, url: string): Json | undefined {
  if (typeof method !== 'string') return undefined;
  const operation = TOKEN_SERVER_OPERATIONS[`${method.toUpperCase()} ${url}`];
  return operation ? { tags: [TOKEN_SERVER_TAG.name], ...structuredClone(operation) } : undefined;
}
