import type { Config } from '../../config/schema.js';
import { STORE_RETRY_AFTER_SECONDS } from '../../store/errors.js';
import { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS, CORS_MAX_AGE_SECONDS, CORS_METHODS } from '../cors.js';
import { SECURITY_HEADERS } from '../plugins/request-context.js';
import { ErrorBodySchema, ErrorDetailSchema } from '../rest/common-schemas.js';
import { isV1Path, v1DeprecationHeaderDocs } from '../rest/orders/deprecation.js';
import { findAuthTag, securityFor, securitySchemes } from './security.js';
import { TOKEN_SERVER_SCHEMAS, TOKEN_SERVER_TAG, tokenServerOperation } from './token-server.js';

type Json = Record<string, unknown>;

export const OPENAPI_VERSION = '3.1.0';

const RATE_LIMIT_HEADERS: Record<string, { description: string; schema: Json }> = {
  'X-RateLimit-Limit': {
    description: 'Requests allowed in the sliding window of 3,600 seconds (by API-key tier).',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests still allowed in the window after this one.',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Reset': {
    description: 'Unix time (seconds) at which the oldest counted request leaves the window.',
    schema: { type: 'integer' },
  },
};

const RETRY_AFTER = {
  description: 'Whole seconds (at least 1) until the oldest counted request leaves the window.',
  schema: { type: 'integer', minimum: 1 },
};

/** A 503 for a database outage (src/http/errors.ts); a timed-out or draining answer has none. */
const UNAVAILABLE_RETRY_AFTER = {
  description: `Whole seconds to wait before retrying (${STORE_RETRY_AFTER_SECONDS}): sent when the database is unreachable.`,
  schema: { type: 'integer', minimum: 1 },
};

/** On the 415 for a body sent with a Content-Encoding (src/http/content-encoding.ts): send it unencoded. */
const ACCEPT_ENCODING = {
  description: '`identity`: no route decodes gzip, br or any other content coding; send the body as it is.',
  schema: { type: 'string', const: 'identity' },
};

/** Set on every answer by the request-context plugin (src/http/plugins/request-context.ts). */
const REQUEST_ID = {
  description: "This request's id, as in the error body's `request_id` and the access log.",
  schema: { type: 'string' },
};

/** @fastify/cors (src/http/cors.ts) varies every answer on Origin, whether or not it was listed. */
const VARY = {
  description:
    "Always includes `Origin` (CORS); an answer that depends on the caller's credentials also names `Authorization` and `X-API-Key`.",
  schema: { type: 'string' },
};

/** The challenges of src/auth/authenticator.ts (401) and of the caller step in src/http/auth.ts (403). */
const CHALLENGE = {
  description:
    'On 401: `Bearer`, with `error="invalid_token"` and an `error_description` when a bearer token was refused.',
  schema: { type: 'string' },
};
const SCOPE_CHALLENGE = {
  description:
    'Sent when the credentials were a bearer token: `Bearer error="insufficient_scope", scope="<the route\'s scope>"`.',
  schema: { type: 'string' },
};

type HeaderDoc = { description: string; schema: Json };

/**
 * The security headers the request-context plugin (src/http/plugins/request-context.ts) sets on
 * every answer, named as the document spells them; keyed by its constant, so that a header added
 * there and not here fails to compile. Each one's value is the constant's.
 */
const SECURITY_HEADER_DOCS: Record<keyof typeof SECURITY_HEADERS, { name: string; description: string }> = {
  'x-content-type-options': {
    name: 'X-Content-Type-Options',
    description: '`nosniff`: a browser takes the body as its `Content-Type` says, never guessing.',
  },
  'x-frame-options': {
    name: 'X-Frame-Options',
    description: '`DENY`: no page may show the answer in a frame.',
  },
  'referrer-policy': {
    name: 'Referrer-Policy',
    description:
      "A link followed from the answer names only this origin to another one. The token server's " +
      'pages and redirects declare their own, stricter value.',
  },
};

function securityHeaderDocs(): Record<string, HeaderDoc> {
  return Object.fromEntries(
    (Object.keys(SECURITY_HEADER_DOCS) as Array<keyof typeof SECURITY_HEADERS>).map((key) => [
      SECURITY_HEADER_DOCS[key].name,
      {
        description: SECURITY_HEADER_DOCS[key].description,
        schema: { type: 'string', const: SECURITY_HEADERS[key] },
      },
    ]),
  );
}
const SECURITY_HEADER_NAMES = Object.values(SECURITY_HEADER_DOCS).map((h) => h.name);

const ONLY_LISTED_ORIGIN = "Only when the request's `Origin` is one of `CORS_ORIGINS` (src/http/cors.ts)";

/**
 * What @fastify/cors (src/http/cors.ts) adds to an answer, preflights aside, for a listed origin.
 * `Vary: Origin` is on every answer whatever the origin, and declared with Vary above.
 */
const CORS_HEADER_DOCS: Record<string, HeaderDoc> = {
  'Access-Control-Allow-Origin': {
    description: `${ONLY_LISTED_ORIGIN}: that origin, echoed (never \`*\`). Without it a browser hides the answer from the page.`,
    schema: { type: 'string' },
  },
  'Access-Control-Allow-Credentials': {
    description: `${ONLY_LISTED_ORIGIN}: \`true\`, a page may send credentials.`,
    schema: { type: 'string', const: 'true' },
  },
  'Access-Control-Expose-Headers': {
    description: `${ONLY_LISTED_ORIGIN}: the response headers a page's script may read beyond the safelisted ones.`,
    schema: { type: 'string', const: CORS_EXPOSED_HEADERS.join(', ') },
  },
};
const CORS_HEADER_NAMES = Object.keys(CORS_HEADER_DOCS);

/**
 * The preflight, in the document's description rather than as an OPTIONS operation on every path:
 * a browser sends it by itself before a cross-origin call, no API client calls it, and as operations
 * it would double Swagger UI's list and give generated clients a method per path that nobody uses.
 */
const CORS_DESCRIPTION =
  'Answers to a request whose `Origin` is listed in `CORS_ORIGINS` carry `Access-Control-Allow-Origin` ' +
  '(that origin), `Access-Control-Allow-Credentials` and `Access-Control-Expose-Headers`, declared on ' +
  'every response; other origins get the same answer without them. Every path also answers the CORS ' +
  'preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`), which is not listed as an ' +
  'operation: from a listed origin 204 with `Access-Control-Allow-Origin`, ' +
  '`Access-Control-Allow-Credentials: true`, ' +
  `\`Access-Control-Allow-Methods: ${CORS_METHODS.join(', ')}\`, ` +
  `\`Access-Control-Allow-Headers: ${CORS_ALLOWED_HEADERS.join(', ')}\`, ` +
  `\`Access-Control-Max-Age: ${CORS_MAX_AGE_SECONDS}\`, \`Vary\` and \`X-Request-Id\`; from any other origin ` +
  '403 `forbidden` in the REST error body. Every answer carries ' +
  `${SECURITY_HEADER_NAMES.map((h) => `\`${h}\``).join(', ')}.`;

const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

const TOKEN_SERVER_PATHS = /^\/(oauth\/|\.well-known\/|authorize$)/;

const withoutId = (schema: object): Json => {
  const { $id: _id, ...rest } = schema as Json;
  return JSON.parse(JSON.stringify(rest)) as Json;
};

/**
 * First this server relative to the document (PUBLIC_URL's path), then PUBLIC_URL itself. Swagger
 * UI and other clients resolve a relative server against the URL they read the document from, so
 * Try it out calls the origin the page was opened at (http://localhost:3000/docs when PUBLIC_URL
 * is http://127.0.0.1:3000) instead of another origin that CORS would refuse. PUBLIC_URL stays
 * listed for a client that read the document from a file. The OAuth flows keep AUTH_URL's
 * absolute addresses: the issuer and the registered redirect URIs are absolute.
 */
export function servers(publicUrl: string): Array<{ url: string; description: string }> {
  const path = new URL(publicUrl).pathname.replace(/\/+$/, '') || '/';
  return [
    { url: path, description: 'This server, at the address the document was read from' },
    { url: publicUrl, description: 'PUBLIC_URL' },
  ];
}

/** The document's fixed parts: info, servers, security schemes and shared components. */
export function openapiBase(config: Config, version: string): Json {
  const errorBody = withoutId(ErrorBodySchema);
  errorBody.properties = {
    ...(errorBody.properties as Json),
    details: { type: 'array', items: { $ref: '#/components/schemas/ErrorDetail' } },
  };
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'Atrium API',
      version,
      description:
        'Users, organizations and orders through REST APIs, and an OAuth 2.1 token server (tag `oauth`) ' +
        'that issues the bearer tokens they accept. Every REST endpoint takes `X-API-Key` or ' +
        '`Authorization: Bearer`. Authenticated REST responses carry `X-RateLimit-Limit`, ' +
        '`X-RateLimit-Remaining` and `X-RateLimit-Reset`; over the limit the answer is 429 with ' +
        '`Retry-After`. The token server answers errors with the RFC 6749 body `{ error, error_description }`. ' +
        CORS_DESCRIPTION,
    },
    servers: servers(config.publicUrl),
    tags: [TOKEN_SERVER_TAG],
    components: {
      securitySchemes: securitySchemes(config.authUrl),
      schemas: {
        ErrorDetail: withoutId(ErrorDetailSchema),
        ErrorBody: errorBody,
        RateLimitedBody: rateLimitedBody(),
        ...structuredClone(TOKEN_SERVER_SCHEMAS),
      },
      headers: {
        ...RATE_LIMIT_HEADERS,
        'Retry-After': RETRY_AFTER,
        UnavailableRetryAfter: UNAVAILABLE_RETRY_AFTER,
        'Accept-Encoding': ACCEPT_ENCODING,
        'X-Request-Id': REQUEST_ID,
        Vary: VARY,
        'WWW-Authenticate': CHALLENGE,
        InsufficientScopeChallenge: SCOPE_CHALLENGE,
        ...v1DeprecationHeaderDocs(config.v1Sunset),
        ...securityHeaderDocs(),
        ...CORS_HEADER_DOCS,
      },
    },
  };
}

function rateLimitedBody(): Json {
  return {
    allOf: [
      { $ref: '#/components/schemas/ErrorBody' },
      {
        type: 'object',
        required: ['limit', 'window_seconds', 'retry_after'],
        properties: {
          error: { const: 'rate_limit_exceeded' },
          limit: { type: 'integer' },
          window_seconds: { type: 'integer', const: 3600 },
          retry_after: { type: 'integer', minimum: 1 },
        },
      },
    ],
  };
}

/**
 * Per route: the security the route's caller step really enforces (unless the route states its
 * own), and the token server's own address for its endpoints when it differs from the API's. The
 * token server's routes are hidden and schema-less (a schema would change how they validate and
 * serialize); their documentation from token-server.ts is swapped in here, for the document only.
 */
export function makeTransform(config: Config) {
  return ({ schema, url, route }: { schema: unknown; url: string; route: unknown }) => {
    const documented = tokenServerOperation((route as Json | undefined)?.method, url);
    const out: Json = documented ?? { ...((schema as Json | undefined) ?? {}) };
    const tag = findAuthTag(route as Json);
    if (out.security === undefined) out.security = tag ? securityFor(tag) : [];
    if (TOKEN_SERVER_PATHS.test(url) && config.authUrl !== config.publicUrl && out.servers === undefined) {
      out.servers = [{ url: config.authUrl }];
    }
    return { schema: out, url };
  };
}

const isSecured = (operation: Json) =>
  Array.isArray(operation.security) &&
  (operation.security as Json[]).some((requirement) => Object.keys(requirement).length > 0);

const requiredScopes = (operation: Json): string[] =>
  ((operation.security ?? []) as Json[]).flatMap((requirement) =>
    Object.values(requirement).flatMap((scopes) => scopes as string[]),
  );

/** The methods whose bodies Fastify parses (GET and HEAD bodies are never read). */
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete', 'options']);

const errorResponse = (description: string, schema = 'ErrorBody'): Json => ({
  description,
  content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } },
});

/**
 * Over the generated document: every REST operation that can carry a body documents its 413 and 415, every
 * secured one its 401 and 429 and the rate-limit headers of each response it gives once the caller
 * is known, and every inline copy of the error body becomes a reference to the one ErrorBody
 * component.
 */
export function finishDocument(doc: Json): Json {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Json>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue;
      const responses = operation.responses as Record<string, Json>;
      // The token server has its own error body, client authentication, headers and failure limits.
      if (!TOKEN_SERVER_PATHS.test(path)) finishRestOperation(method, operation, responses);
      // After the responses added above, so that they carry these too.
      for (const response of Object.values(responses)) {
        const headers = (response.headers ??= {}) as Json;
        headers['X-Request-Id'] = headerRef('X-Request-Id');
        // A route's own, more precise Vary (src/http/rest/common-schemas.ts) stays.
        headers.Vary ??= headerRef('Vary');
        // The onSend hook of src/http/rest/orders/index.ts, on every answer under /api/v1.
        if (isV1Path(path)) for (const name of V1_HEADERS) headers[name] = headerRef(name);
        // The request-context plugin's, on every answer; a page's own Referrer-Policy stays.
        for (const name of SECURITY_HEADER_NAMES) headers[name] ??= headerRef(name);
        for (const name of CORS_HEADER_NAMES) headers[name] = headerRef(name);
      }
    }
  }
  dropUnusedHoistedSchemas(doc);
  return doc;
}

const V1_HEADERS = Object.keys(v1DeprecationHeaderDocs(new Date(0)));

function finishRestOperation(method: string, operation: Json, responses: Record<string, Json>): void {
  for (const [status, response] of Object.entries(responses)) referenceErrorBodies(status, response);
  // Fastify's parser reads a body sent with any of these methods, whether or not the route
  // declares one (a cancel, a DELETE): text/plain is 415 and too large is 413 before the route
  // runs (src/http/errors.ts), so every such operation documents both.
  if (operation.requestBody !== undefined || BODY_METHODS.has(method)) {
    responses['413'] ??= errorResponse('The request body is larger than the limit (`payload_too_large`).');
    responses['415'] ??= errorResponse(
      'The request body is not `application/json`, or is sent with a `Content-Encoding` (`unsupported_media_type`).',
    );
    ((responses['415'].headers ??= {}) as Json)['Accept-Encoding'] = headerRef('Accept-Encoding');
    responses['408'] ??= errorResponse(
      'The request body did not all arrive within `REQUEST_TIMEOUT_MS` (`request_timeout`); the connection is closed.',
    );
  }
  // Any route, before or after the caller is known (src/http/errors.ts, src/http/drain.ts).
  responses['503'] ??= errorResponse(
    '`service_unavailable`: no answer within `REQUEST_TIMEOUT_MS`, the process is shutting down, or the ' +
      'database is unreachable (then with `Retry-After`). Retry.',
  );
  ((responses['503'].headers ??= {}) as Json)['Retry-After'] = headerRef('UnavailableRetryAfter');
  if (!isSecured(operation)) return;
  responses['401'] ??= errorResponse(
    'Missing, invalid or revoked credentials (`invalid_api_key`, `invalid_token`, `token_expired`).',
  );
  // A token (or a viewer's key) can lack the route's scope: the caller step answers 403.
  const scoped = requiredScopes(operation).length > 0;
  if (scoped) {
    responses['403'] ??= errorResponse(
      '`insufficient_scope`: the credentials lack the route\'s scope (`WWW-Authenticate: Bearer error="insufficient_scope"`).',
    );
  }
  responses['429'] = errorResponse('Rate limit exceeded.', 'RateLimitedBody');
  for (const [status, response] of Object.entries(responses)) {
    const headers = (response.headers ??= {}) as Json;
    // The caller step's challenges: every 401, and a bearer token's 403 for a lacking scope.
    if (status === '401') {
      headers['WWW-Authenticate'] = headerRef('WWW-Authenticate');
      continue;
    }
    if (status === '403' && scoped) headers['WWW-Authenticate'] = headerRef('InsufficientScopeChallenge');
    for (const name of Object.keys(RATE_LIMIT_HEADERS)) headers[name] = headerRef(name);
    if (status === '429') headers['Retry-After'] = headerRef('Retry-After');
  }
}

/**
 * A schema with an `$id` nested in a route's schema (ErrorDetail inside ErrorBody) is hoisted by
 * the generator as `def-N`; once the inline error bodies have become references to ErrorBody
 * nothing points at it any more, and linters report it unused.
 */
function dropUnusedHoistedSchemas(doc: Json): void {
  const components = (doc.components ?? {}) as Json;
  const schemas = (components.schemas ?? {}) as Json;
  const hoisted = Object.keys(schemas).filter((name) => /^def-\d+$/.test(name));
  if (hoisted.length === 0) return;
  const text = JSON.stringify(doc);
  for (const name of hoisted) {
    const ref = `"#/components/schemas/${name}"`;
    if (!text.includes(ref)) delete schemas[name];
  }
}

function referenceErrorBodies(status: string, response: Json): void {
  if (!/^[45]/.test(status)) return;
  const content = response.content as Record<string, Json> | undefined;
  for (const media of Object.values(content ?? {})) {
    const schema = media.schema as Json | undefined;
    if (schema?.$id === 'ErrorBody' || looksLikeErrorBody(schema)) {
      const extra = extraProperties(schema!);
      media.schema =
        extra.length === 0
          ? { $ref: '#/components/schemas/ErrorBody' }
          : {
              allOf: [
                { $ref: '#/components/schemas/ErrorBody' },
                { type: 'object', properties: pick(schema!, extra) },
              ],
            };
    }
  }
}

const ERROR_FIELDS = ['error', 'message', 'request_id', 'details'];

function looksLikeErrorBody(schema: Json | undefined): boolean {
  const props = schema?.properties as Json | undefined;
  return !!props && ERROR_FIELDS.every((f) => f in props);
}

const extraProperties = (schema: Json) =>
  Object.keys((schema.properties as Json | undefined) ?? {}).filter((k) => !ERROR_FIELDS.includes(k));

function pick(schema: Json, keys: string[]): Json {
  const props = schema.properties as Json;
  return Object.fromEntries(keys.map((k) => [k, props[k]]));
}
