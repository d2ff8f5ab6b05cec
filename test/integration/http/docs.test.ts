import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../../src/auth/scopes.js';
import { servers } from '../../../src/http/docs/openapi.js';
import { findAuthTag } from '../../../src/http/docs/security.js';
import { UpdateUserBody } from '../../../src/http/rest/users/schemas.js';
import { type RouteModule, ROUTE_MODULES } from '../../../src/http/routes.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import {
  basic,
  codeFlowTokens,
  form,
  type OAuthTestServer,
  startOAuthServer,
  userWithPassword,
} from '../oauth/support.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PUBLIC_URL = 'https://api.example.com';
const AUTH_URL = 'https://auth.example.com';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every route registered after it, with its schema, to compare against the document. */
const recorded: RouteOptions[] = [];
const recorder: RouteModule = {
  name: 'test-route-recorder',
  roles: ['api', 'auth'],
  register(app) {
    app.addHook('onRoute', (route) => void recorded.push(route));
  },
};

function resolvePointer(doc: Json, ref: string): unknown {
  return ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
}

function collectRefs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) collectRefs(n, out);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else collectRefs(v, out);
    }
  }
  return out;
}

/** A component schema with every `#/components/schemas/...` reference inlined, for Ajv. */
function inlined(doc: Json, node: unknown): unknown {
  if (Array.isArray(node)) return node.map((n) => inlined(doc, n));
  if (!node || typeof node !== 'object') return node;
  const { $ref, ...rest } = node as Json;
  if (typeof $ref === 'string') return inlined(doc, resolvePointer(doc, $ref));
  return Object.fromEntries(
    Object.entries(rest)
      .filter(([k]) => k !== 'discriminator')
      .map(([k, v]) => [k, k === 'mapping' ? v : inlined(doc, v)]),
  );
}

const TOKEN_SERVER_ROUTES = [
  'POST /oauth/token',
  'POST /oauth/token/refresh',
  'POST /oauth/introspect',
  'GET /.well-known/jwks.json',
  'GET /.well-known/oauth-authorization-server',
  'GET /authorize',
  'POST /authorize',
];

const isTokenServer = (op: Json) => ((op.tags ?? []) as string[]).includes('oauth');

function operations(doc: Json): Array<{ path: string; method: string; op: Json }> {
  return Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ path, method, op: op as Json })),
  );
}

describe('OpenAPI document and docs pages', () => {
  let atrium: TestAtrium;
  let doc: Json;

  beforeAll(async () => {
    expect(ROUTE_MODULES[0]!.name).toBe('docs');
    ROUTE_MODULES.unshift(recorder);
    try {
      atrium = await startTestAtrium({ PUBLIC_URL, AUTH_URL });
    } finally {
      ROUTE_MODULES.shift();
    }
    const res = await atrium.http!.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    doc = res.json();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.openapi).toBe('3.1.0');
  });

  it('resolves every internal reference', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref.startsWith('#/'), ref).toBe(true);
      expect(resolvePointer(doc, ref), ref).toBeDefined();
    }
  });

  it('uses every component it declares: nothing left over from the generator (def-N)', () => {
    const components = doc.components as Record<string, Json>;
    const unused: string[] = [];
    for (const [kind, entries] of Object.entries(components)) {
      if (kind === 'securitySchemes') continue; // referenced by name, not by $ref
      for (const name of Object.keys(entries)) {
        const pointer = `#/components/${kind}/${name}`;
        // Referenced from anywhere but the entry itself.
        const others = { ...doc, components: { ...components, [kind]: { ...entries, [name]: null } } };
        if (!collectRefs(others).includes(pointer)) unused.push(pointer);
      }
    }
    expect(unused).toEqual([]);
  });

  it('names every operation with a unique, readable operationId; a v1 copy is its v2 name plus V1', () => {
    const ids = operations(doc).map(({ path, method, op }) => ({
      path,
      method,
      id: op.operationId as unknown,
    }));
    const missing = ids
      .filter(({ id }) => typeof id !== 'string')
      .map(({ path, method }) => `${method} ${path}`);
    expect(missing).toEqual([]);
    for (const { id, path } of ids) expect(id, path).toMatch(/^[a-z][A-Za-z0-9]*$/);
    const names = ids.map(({ id }) => id as string);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
    for (const { path, method, id } of ids) {
      if (!path.startsWith('/api/v1/')) continue;
      const v2 = doc.paths[path.replace('/api/v1/', '/api/v2/')]?.[method] as Json | undefined;
      expect(v2, `${method} ${path} has no v2 counterpart`).toBeDefined();
      expect(id, `${method} ${path}`).toBe(`${v2!.operationId}V1`);
    }
    // The names a generated client shows; a rename breaks its callers, so it is a deliberate change.
    const byRoute = Object.fromEntries(
      ids.map(({ path, method, id }) => [`${method.toUpperCase()} ${path}`, id]),
    );
    expect(byRoute).toMatchObject({
      'GET /api/v2/orders': 'listOrders',
      'GET /api/v1/orders/{order_id}': 'getOrderV1',
      'POST /api/v2/orders/{order_id}/cancel': 'cancelOrder',
      'GET /v1/users/{user_id}': 'getUser',
      'POST /api/v2/webhook_endpoints': 'createWebhookEndpoint',
      'POST /oauth/token': 'requestToken',
    });
  });

  it('describes the service: info, the public server and the ErrorBody component', () => {
    expect(doc.info).toMatchObject({ title: 'Atrium API', version: expect.any(String) });
    // Relative first, so Swagger UI calls the origin it was opened at; PUBLIC_URL as well.
    expect(doc.servers.map((s: Json) => s.url)).toEqual(['/', PUBLIC_URL]);
    expect(doc.components.schemas.ErrorBody).toMatchObject({
      type: 'object',
      required: ['error', 'message', 'request_id', 'details'],
    });
    expect(doc.components.schemas.ErrorDetail.required).toEqual(['field', 'message', 'code']);
  });

  it('keeps the path of a PUBLIC_URL behind a prefix in the relative server', () => {
    expect(servers('https://example.com/atrium/').map((s) => s.url)).toEqual([
      '/atrium',
      'https://example.com/atrium/',
    ]);
    expect(servers('http://127.0.0.1:3000')[0]!.url).toBe('/');
  });

  it('declares the API-key, bearer and OAuth 2 schemes with the eight scopes', () => {
    const schemes = doc.components.securitySchemes;
    expect(schemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(schemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    const code = schemes.oauth2.flows.authorizationCode;
    expect(schemes.oauth2.type).toBe('oauth2');
    expect(code.authorizationUrl).toBe(`${AUTH_URL}/authorize`);
    expect(code.tokenUrl).toBe(`${AUTH_URL}/oauth/token`);
    expect(Object.keys(code.scopes).sort()).toEqual([...ALL_SCOPES].sort());
    expect(Object.keys(schemes.oauth2.flows.clientCredentials.scopes).sort()).toEqual([...ALL_SCOPES].sort());
  });

  it('lists every registered route that is not hidden, with each of its methods', () => {
    const documented = new Set(operations(doc).map(({ path, method }) => `${method.toUpperCase()} ${path}`));
    const expected = recorded
      .filter((r) => !(r.schema as Json | undefined)?.hide)
      .flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).map((m) => [m, r.url] as const))
      .filter(([m]) => m !== 'HEAD')
      .map(([m, url]) => `${m} ${url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    expect(expected.length).toBeGreaterThan(5);
    for (const route of expected) expect(documented, route).toContain(route);
    for (const route of [
      'GET /v1/users/{user_id}',
      'PATCH /v1/users/{user_id}',
      'GET /v1/organizations/{organization_id}',
      'POST /api/v2/users/{user_id}/verify',
    ]) {
      expect(documented).toContain(route);
    }
  });

  it('documents the security each route enforces, with its scope', () => {
    const op = doc.paths['/v1/users/{user_id}'].get;
    expect(op.security).toEqual([{ apiKey: [] }, { bearerAuth: ['users:read'] }, { oauth2: ['users:read'] }]);
    expect(doc.paths['/v1/users/{user_id}'].patch.security).toContainEqual({ oauth2: ['users:write'] });
  });

  it('documents, on every operation, the three caller schemes with exactly the scope its caller step enforces', async () => {
    // The scope a route enforces, read from the route as registered (the tag its caller step
    // carries), not from a copy: a route whose docs state their own security cannot drift from it.
    const routeOf = (method: string, path: string) =>
      recorded.find(
        (r) =>
          (Array.isArray(r.method) ? r.method : [r.method]).includes(method.toUpperCase()) &&
          r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}') === path,
      );
    const service = await atrium.services.oauth.clients.create({
      name: 'Scope walk',
      scopes: 'content:read content:write',
    });
    const tokenFor = async (scope: string) => {
      const res = await atrium.http!.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basic(service.client_id, service.client_secret!),
        },
        payload: form({ grant_type: 'client_credentials', scope }),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().access_token as string;
    };
    const tokens = {
      'content:read': await tokenFor('content:read'),
      'content:write': await tokenFor('content:write'),
    };

    const rest = operations(doc).filter(({ op }) => !isTokenServer(op));
    expect(rest.length).toBeGreaterThan(40);
    let scoped = 0;
    for (const { path, method, op } of rest) {
      const where = `${method.toUpperCase()} ${path}`;
      const route = routeOf(method, path);
      expect(route, where).toBeDefined();
      const tag = findAuthTag(route as unknown as Json);
      if (!tag) {
        expect(op.security ?? [], where).toEqual([]);
        continue;
      }
      const scopes = tag.scope ? [tag.scope] : [];
      const schemes = [{ apiKey: [] }, { bearerAuth: scopes }, { oauth2: scopes }];
      expect(op.security, where).toEqual(tag.optional ? [{}, ...schemes] : schemes);
      if (tag.optional) continue;

      // And the route really answers as documented: 401 without credentials, and 403
      // insufficient_scope naming that same scope for a token that lacks it.
      const url = path.replace(/\{[^}]+\}/g, 'x');
      const upper = method.toUpperCase() as 'GET';
      const anonymous = await atrium.http!.inject({ method: upper, url });
      expect(anonymous.statusCode, where).toBe(401);
      if (!tag.scope) continue;
      scoped += 1;
      const token = tokens[tag.scope === 'content:read' ? 'content:write' : 'content:read'];
      const lacking = await atrium.http!.inject({
        method: upper,
        url,
        headers: { authorization: `Bearer ${token}` },
      });
      expect(lacking.statusCode, where).toBe(403);
      expect(lacking.json().error, where).toBe('insufficient_scope');
      expect(lacking.headers['www-authenticate'], where).toBe(
        `Bearer error="insufficient_scope", scope="${tag.scope}"`,
      );
      const forbidden = op.responses['403'];
      expect(forbidden?.description, `${where} 403`).toMatch(/insufficient_scope/);
      expect(forbidden.content['application/json'].schema, `${where} 403`).toEqual({
        $ref: '#/components/schemas/ErrorBody',
      });
    }
    expect(scoped).toBeGreaterThan(40);
  });

  it('documents 401, 429 and the rate-limit headers on every secured operation', () => {
    // The REST rate limit; the token server has its own failure budgets (tested below).
    const secured = operations(doc).filter(
      ({ op }) => !isTokenServer(op) && (op.security ?? []).some((r: Json) => Object.keys(r).length > 0),
    );
    expect(secured.length).toBeGreaterThan(5);
    for (const { path, method, op } of secured) {
      const where = `${method} ${path}`;
      expect(op.responses['401'], where).toBeDefined();
      expect(op.responses['429'].headers['Retry-After'], where).toEqual({
        $ref: '#/components/headers/Retry-After',
      });
      for (const [status, response] of Object.entries(op.responses as Json)) {
        if (status === '401') continue;
        for (const h of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
          expect(response.headers?.[h], `${where} ${status} ${h}`).toEqual({
            $ref: `#/components/headers/${h}`,
          });
        }
      }
    }
    const rateLimited = resolvePointer(
      doc,
      doc.paths['/v1/users/{user_id}'].get.responses['429'].content['application/json'].schema.$ref,
    );
    expect(JSON.stringify(rateLimited)).toContain('retry_after');
  });

  it('documents 413 and 415 on every operation with a request body, as every such route answers them', async () => {
    const withBody = operations(doc).filter(({ op }) => !isTokenServer(op) && op.requestBody !== undefined);
    expect(withBody.length).toBeGreaterThan(5);
    for (const { path, method, op } of withBody) {
      for (const status of ['413', '415']) {
        expect(
          op.responses[status]?.content['application/json'].schema,
          `${method} ${path} ${status}`,
        ).toEqual({
          $ref: '#/components/schemas/ErrorBody',
        });
      }
    }
    const caller = await atrium.caller();
    const notJson = await atrium.http!.inject({
      method: 'POST',
      url: '/api/v2/orders',
      headers: { ...caller.headers, 'content-type': 'text/plain' },
      payload: 'x',
    });
    expect(notJson.statusCode).toBe(415);
    const tooLarge = await atrium.http!.inject({
      method: 'POST',
      url: '/api/v2/orders',
      headers: { ...caller.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(tooLarge.statusCode).toBe(413);
  });

  it("documents 503 (Retry-After for an outage) on every REST operation, 408 beside 413 and 415, and the 415's Accept-Encoding", () => {
    // Every route answers 503 past REQUEST_TIMEOUT_MS, while draining or in a database outage;
    // until 2026-11-29 no operation declared it, so generated clients had no type for the answer.
    const rest = operations(doc).filter(({ op }) => !isTokenServer(op));
    expect(rest.length).toBeGreaterThan(40);
    for (const { path, method, op } of rest) {
      const where = `${method} ${path}`;
      const unavailable = op.responses['503'];
      expect(unavailable?.description, where).toMatch(/service_unavailable/);
      expect(unavailable.content['application/json'].schema, where).toEqual({
        $ref: '#/components/schemas/ErrorBody',
      });
      expect(unavailable.headers['Retry-After'], where).toEqual({
        $ref: '#/components/headers/UnavailableRetryAfter',
      });
      if (op.requestBody === undefined) continue;
      expect(op.responses['408']?.description, where).toMatch(/request_timeout/);
      expect(op.responses['415'].headers['Accept-Encoding'], where).toEqual({
        $ref: '#/components/headers/Accept-Encoding',
      });
    }
    expect(doc.components.headers['Accept-Encoding'].schema).toEqual({ type: 'string', const: 'identity' });
  });

  it('describes errors with the one ErrorBody component', () => {
    const responses = doc.paths['/v1/users/{user_id}'].patch.responses;
    for (const status of ['400', '403', '404', '409', '500']) {
      expect(responses[status].content['application/json'].schema, status).toEqual({
        $ref: '#/components/schemas/ErrorBody',
      });
    }
  });

  it('takes request schemas from the same TypeBox schemas that validate requests', () => {
    const op = doc.paths['/v1/users/{user_id}'].patch;
    const body = op.requestBody.content['application/json'].schema;
    expect(body.additionalProperties).toBe(false);
    expect(body.properties.name.maxLength).toBe(UpdateUserBody.properties.name.maxLength);
    expect(body.properties.name.minLength).toBe(1);
    expect(body.properties.email.format).toBe('email');
    expect(body.properties.role.enum).toEqual(['admin', 'member', 'viewer']);
    expect(doc.paths['/v1/users/{user_id}'].get.responses['200'].headers['X-Cache'].schema.enum).toEqual([
      'HIT',
      'MISS',
    ]);
  });

  it('says what the service serves: REST APIs and the token server, no GraphQL or gRPC yet', () => {
    expect(doc.info.description).toMatch(/REST APIs/);
    expect(doc.info.description).toMatch(/OAuth 2\.1 token server/);
    expect(doc.info.description).not.toMatch(/GraphQL|gRPC/);
    expect(doc.tags).toContainEqual(expect.objectContaining({ name: 'oauth' }));
  });

  describe('the OAuth 2.1 token server', () => {
    const op = (route: string): Json => {
      const [method, path] = route.split(' ') as [string, string];
      return doc.paths[path]?.[method.toLowerCase()];
    };
    const schemaOf = (name: string) => {
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      addFormats.default(ajv);
      return ajv.compile(inlined(doc, doc.components.schemas[name]) as Json);
    };
    const expectShape = (name: string, body: unknown) => {
      const validate = schemaOf(name);
      expect(validate(body), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
    };
    const post = (url: string, payload: string, headers: Record<string, string> = {}) =>
      atrium.http!.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload,
      });

    it('documents every token-server route with its methods, under the oauth tag at AUTH_URL', () => {
      const documented = operations(doc).map(({ path, method }) => `${method.toUpperCase()} ${path}`);
      for (const route of TOKEN_SERVER_ROUTES) {
        expect(documented, route).toContain(route);
        const o = op(route);
        expect(o.tags, route).toEqual(['oauth']);
        expect(o.summary, route).toEqual(expect.any(String));
        expect(o.description, route).toEqual(expect.any(String));
        expect(o.servers, route).toEqual([{ url: AUTH_URL }]);
        expect(o.responses['200'], route).toBeDefined();
      }
      expect(Object.keys(doc.paths['/authorize']).sort()).toEqual(['get', 'post']);
      expect(doc.paths['/oauth/assets/pages.css']).toBeUndefined();
      expect(operations(doc).filter(({ op: o }) => isTokenServer(o))).toHaveLength(
        TOKEN_SERVER_ROUTES.length,
      );
    });

    it('stays documentation only: the routes keep no schema that would validate or serialize', () => {
      for (const route of [...TOKEN_SERVER_ROUTES, 'GET /oauth/assets/pages.css']) {
        const [method, url] = route.split(' ');
        const registered = recorded.find((r) => r.url === url && r.method === method);
        expect(registered, route).toBeDefined();
        expect(Object.keys(registered!.schema as Json), route).toEqual(['hide']);
      }
    });

    it('describes client authentication: HTTP Basic, or none for public clients', () => {
      expect(doc.components.securitySchemes.clientBasic).toMatchObject({ type: 'http', scheme: 'basic' });
      for (const route of ['POST /oauth/token', 'POST /oauth/token/refresh']) {
        expect(op(route).security, route).toEqual([{ clientBasic: [] }, {}]);
      }
      expect(op('POST /oauth/introspect').security).toEqual([{ clientBasic: [] }]);
      for (const route of ['GET /.well-known/jwks.json', 'GET /.well-known/oauth-authorization-server']) {
        expect(op(route).security, route).toEqual([]);
      }
    });

    it('describes the request bodies: one form schema per grant, JSON for the refresh endpoint', () => {
      const token = op('POST /oauth/token').requestBody.content;
      expect(Object.keys(token)).toEqual(['application/x-www-form-urlencoded']);
      const grants = token['application/x-www-form-urlencoded'].schema;
      expect(grants.discriminator.propertyName).toBe('grant_type');
      const byGrant = Object.fromEntries(
        (grants.oneOf as Json[]).map((r) => {
          const schema = resolvePointer(doc, r.$ref) as Json;
          return [schema.properties.grant_type.enum?.[0] ?? schema.properties.grant_type.const, schema];
        }),
      );
      expect(Object.keys(byGrant).sort()).toEqual([
        'authorization_code',
        'client_credentials',
        'refresh_token',
      ]);
      expect(byGrant.authorization_code!.required).toEqual(
        expect.arrayContaining(['code', 'redirect_uri', 'code_verifier']),
      );
      expect(byGrant.refresh_token!.required).toContain('refresh_token');
      expect(Object.keys(grants.discriminator.mapping).sort()).toEqual(Object.keys(byGrant).sort());

      const introspect = op('POST /oauth/introspect').requestBody.content;
      expect(Object.keys(introspect)).toEqual(['application/x-www-form-urlencoded']);
      expect(
        (resolvePointer(doc, introspect['application/x-www-form-urlencoded'].schema.$ref) as Json).required,
      ).toEqual(['token']);
      const refresh = op('POST /oauth/token/refresh').requestBody.content;
      expect(Object.keys(refresh)).toEqual(['application/json']);
      expect((resolvePointer(doc, refresh['application/json'].schema.$ref) as Json).required).toEqual([
        'refresh_token',
        'client_id',
      ]);
      const login = op('POST /authorize').requestBody.content['application/x-www-form-urlencoded'].schema;
      const fields = Object.keys((resolvePointer(doc, login.$ref) as Json).properties);
      for (const f of [
        'client_id',
        'redirect_uri',
        'code_challenge',
        'username',
        'password',
        'consent',
        'csrf_token',
      ])
        expect(fields).toContain(f);
    });

    it('describes the query parameters of GET /authorize', () => {
      const params = op('GET /authorize').parameters as Json[];
      expect(params.every((p) => p.in === 'query')).toBe(true);
      const required = params.filter((p) => p.required).map((p) => p.name);
      expect(required.sort()).toEqual(
        ['client_id', 'code_challenge', 'code_challenge_method', 'redirect_uri', 'response_type'].sort(),
      );
      expect(params.map((p) => p.name)).toEqual(expect.arrayContaining(['scope', 'state']));
      expect(params.find((p) => p.name === 'code_challenge_method')!.schema.enum).toEqual(['S256']);
    });

    it('describes every error with the RFC 6749 body, and the redirects and pages of /authorize', () => {
      const errorRef = { $ref: '#/components/schemas/OAuthErrorBody' };
      for (const route of ['POST /oauth/token', 'POST /oauth/token/refresh', 'POST /oauth/introspect']) {
        const responses = op(route).responses as Json;
        for (const status of ['400', '401', '413', '429', '500']) {
          expect(responses[status]?.content['application/json'].schema, `${route} ${status}`).toEqual(
            errorRef,
          );
        }
        expect(responses['401'].headers['WWW-Authenticate'], route).toBeDefined();
        expect(responses['429'].headers['Retry-After'], route).toBeDefined();
        expect(responses['200'].headers['Cache-Control'].schema.const, route).toBe('no-store');
        // Not the REST rate limit: no X-RateLimit headers, no REST ErrorBody.
        expect(JSON.stringify(responses), route).not.toMatch(
          /X-RateLimit|schemas\/ErrorBody"|RateLimitedBody/,
        );
      }
      expect(
        op('GET /.well-known/jwks.json').responses['200'].content['application/jwk-set+json'].schema,
      ).toEqual({ $ref: '#/components/schemas/JsonWebKeySet' });
      for (const route of ['GET /authorize', 'POST /authorize']) {
        const responses = op(route).responses as Json;
        expect(responses['302'].headers.Location, route).toBeDefined();
        expect(responses['302'].content, route).toBeUndefined();
        for (const status of ['200', '400', '500'])
          expect(Object.keys(responses[status].content), `${route} ${status}`).toEqual(['text/html']);
      }
      // A form over 16 KiB is refused with the error page (test/integration/http/openapi-body-refusals.test.ts).
      expect(Object.keys(op('POST /authorize').responses['413'].content)).toEqual(['text/html']);
      expect(Object.keys(op('POST /authorize').responses).sort()).toEqual(
        ['200', '302', '400', '403', '413', '429', '500'].sort(),
      );
    });

    it('describes the shapes the endpoints really answer', async () => {
      const metadata = await atrium.http!.inject({
        method: 'GET',
        url: '/.well-known/oauth-authorization-server',
      });
      expectShape('AuthorizationServerMetadata', metadata.json());
      const jwks = await atrium.http!.inject({ method: 'GET', url: '/.well-known/jwks.json' });
      expect(jwks.json().keys.length).toBeGreaterThan(0);
      expectShape('JsonWebKeySet', jwks.json());

      const service = await atrium.services.oauth.clients.create({ name: 'Docs job', scopes: 'orders:read' });
      const auth = { authorization: basic(service.client_id, service.client_secret!) };
      const cc = await post('/oauth/token', form({ grant_type: 'client_credentials' }), auth);
      expect(cc.statusCode).toBe(200);
      expectShape('OAuthTokenResponse', cc.json());

      const active = await post('/oauth/introspect', form({ token: cc.json().access_token }), auth);
      expectShape('OAuthIntrospectionResponse', active.json());
      expect(active.json().active).toBe(true);
      const inactive = await post('/oauth/introspect', form({ token: 'nope' }), auth);
      expect(inactive.json()).toEqual({ active: false });
      expectShape('OAuthIntrospectionResponse', inactive.json());

      const redirect = 'https://app.example.com/callback';
      const app = await atrium.services.oauth.clients.create({
        name: 'Docs app',
        redirectUris: [redirect],
        firstParty: true,
      });
      const user = await userWithPassword(atrium);
      const tokens = await codeFlowTokens(
        atrium,
        { client_id: app.client_id, client_secret: app.client_secret, redirect_uri: redirect },
        user,
      );
      expectShape('OAuthTokenResponse', tokens);
      const rotated = await atrium.http!.inject({
        method: 'POST',
        url: '/oauth/token/refresh',
        payload: { refresh_token: tokens.refresh_token, client_id: app.client_id },
      });
      expect(rotated.statusCode).toBe(200);
      expectShape('OAuthRefreshJsonResponse', rotated.json());

      const bad = await post('/oauth/token', 'grant_type=client_credentials&grant_type=x', auth);
      expectShape('OAuthErrorBody', bad.json());
    });

    it('keeps the RFC 6749 behaviour: no REST validation errors, no serializer dropping fields', async () => {
      const malformed = await post('/oauth/token', 'grant_type=client_credentials&grant_type=refresh_token');
      expect(malformed.statusCode).toBe(400);
      expect(malformed.json()).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
      expect(malformed.headers['cache-control']).toBe('no-store');

      const noGrant = await post('/oauth/token', 'scope=orders:read');
      expect(noGrant.json()).toMatchObject({ error: 'invalid_request' });
      const asJson = await atrium.http!.inject({
        method: 'POST',
        url: '/oauth/token',
        payload: { grant_type: 7 },
      });
      expect(asJson.statusCode).toBe(400);
      expect(asJson.json()).toMatchObject({ error: 'invalid_request' });
      const password = await post(
        '/oauth/token',
        form({ grant_type: 'password', username: 'a', password: 'b' }),
      );
      expect(password.json()).toMatchObject({ error: 'unsupported_grant_type' });
      const anonymous = await post('/oauth/token', form({ grant_type: 'client_credentials' }));
      expect(anonymous.statusCode).toBe(401);
      expect(anonymous.json()).toEqual({ error: 'invalid_client', error_description: expect.any(String) });

      const refresh = await atrium.http!.inject({
        method: 'POST',
        url: '/oauth/token/refresh',
        payload: [1],
      });
      expect(refresh.statusCode).toBe(400);
      expect(refresh.json()).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
      const noToken = await atrium.http!.inject({
        method: 'POST',
        url: '/oauth/token/refresh',
        payload: { refresh_token: 5, client_id: 'x', extra: true },
      });
      expect(noToken.json()).toMatchObject({ error: 'invalid_request' });

      const introspect = await post('/oauth/introspect', 'token=a&token=b');
      expect(introspect.statusCode).toBe(401);
      expect(introspect.json()).toMatchObject({ error: 'invalid_client' });

      for (const res of [malformed, noGrant, asJson, anonymous, refresh, noToken, introspect]) {
        expect(res.body).not.toMatch(/validation_error|request_id/);
      }

      const page = await atrium.http!.inject({ method: 'GET', url: '/authorize?client_id=unknown' });
      expect(page.statusCode).toBe(400);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      const login = await post('/authorize', 'client_id=unknown&client_id=again');
      expect(login.statusCode).toBe(400);
      expect(login.headers['content-type']).toMatch(/^text\/html/);
    });
  });

  it('serves Swagger UI at /docs from local assets only', async () => {
    for (const url of ['/docs', '/docs/']) {
      const page = await atrium.http!.inject({ method: 'GET', url });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      const html = page.body;
      expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
      const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      expect(assets.some((a) => a.endsWith('swagger-ui-bundle.js'))).toBe(true);
      for (const asset of assets) {
        const absolute = new URL(asset, `http://local${url}`).pathname;
        const res = await atrium.http!.inject({ method: 'GET', url: absolute });
        expect(res.statusCode, absolute).toBe(200);
      }
    }
    const spec = await atrium.http!.inject({ method: 'GET', url: '/docs/json' });
    expect(spec.json()).toEqual(doc);
    const init = await atrium.http!.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(init.body).toContain("resolveUrl('./json')");
    expect(init.body).toMatch(/validatorUrl: null/);
  });

  it('serves ReDoc at /redoc with the installed bundle, offline', async () => {
    const page = await atrium.http!.inject({ method: 'GET', url: '/redoc' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('<redoc spec-url="/openapi.json"></redoc>');
    expect(page.body).toContain('<script src="/redoc/redoc.standalone.js"></script>');
    expect(page.body).not.toMatch(/https?:\/\//);
    const script = await atrium.http!.inject({ method: 'GET', url: '/redoc/redoc.standalone.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toMatch(/^application\/javascript/);
    // The installed bundle, but for its one outside address: the Redocly badge's image, served here.
    const onDisk = readFileSync(
      createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'),
      'utf8',
    );
    expect(script.body).not.toContain('cdn.redoc.ly');
    expect(script.body).toBe(
      onDisk.replace('"https://cdn.redoc.ly/redoc/logo-mini.svg"', '"/redoc/logo-mini.svg"'),
    );
    for (const path of ['/redoc/logo-mini.svg', '/redoc/favicon.svg']) {
      const image = await atrium.http!.inject({ method: 'GET', url: path });
      expect(image.statusCode, path).toBe(200);
      expect(image.headers['content-type'], path).toMatch(/^image\/svg\+xml/);
    }
    expect(page.body).toContain('<link rel="icon" type="image/svg+xml" href="/redoc/favicon.svg">');
  });
});

/**
 * What a client over a real socket gets, against what the document served on that socket says:
 * every status answered is documented for the operation, and every body matches the schema
 * documented for that status.
 */
describe('the document against the server’s real answers', () => {
  /** A browser page's origin, listed in CORS_ORIGINS. */
  const ORIGIN = 'https://app.example.com';
  let server: OAuthTestServer;
  let doc: Json;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);

  beforeAll(async () => {
    server = await startOAuthServer({ CORS_ORIGINS: ORIGIN });
    doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as Json;
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** Calls over HTTP and checks the answer against the operation's documented response. */
  async function call(method: 'GET' | 'POST', path: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${server.url}${path}`, { method, headers });
    const text = await res.text();
    const where = `${method} ${path} ${res.status}: ${text}`;
    const responses = doc.paths[path][method.toLowerCase()].responses as Json;
    const documented = responses[String(res.status)];
    expect(documented, `${where} is not documented`).toBeDefined();
    const schema = documented.content?.['application/json']?.schema;
    expect(schema, `${where} has no documented body`).toBeDefined();
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = JSON.parse(text) as unknown;
    const validate = ajv.compile(inlined(doc, schema) as Json);
    expect(validate(body), `${where}: ${JSON.stringify(validate.errors)}`).toBe(true);
    return { status: res.status, body: body as Json };
  }

  it('answers 404 not_found for a missing file under /docs/static/, as for any missing resource', async () => {
    for (const path of [
      '/docs/static/nonexistent.js',
      '/docs/static/a%2fb',
      '/docs/static/nested/missing.css',
      '/docs/nope',
      '/oauth/assets/nope.css',
    ]) {
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(`${server.url}${path}`, { method });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.headers.get('allow'), `${method} ${path}`).toBeNull();
        if (method === 'HEAD') continue;
        const body = (await res.json()) as Json;
        expect(body, path).toEqual({
          error: 'not_found',
          message: expect.any(String),
          request_id: res.headers.get('x-request-id'),
          details: [],
        });
      }
    }
    // The files that are there are served, and another method on the path is still 405.
    const present = await fetch(`${server.url}/docs/static/swagger-ui-bundle.js`);
    expect(present.status).toBe(200);
    await present.arrayBuffer();
    const post = await fetch(`${server.url}/docs/static/nonexistent.js`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(((await post.json()) as Json).error).toBe('method_not_allowed');
  });

  it('documents every status and body of the protected example routes', async () => {
    const { atrium } = server;
    const key = (await atrium.caller()).headers;
    const viewerKey = (await atrium.caller({ role: 'viewer' })).headers;
    const app = await atrium.services.oauth.clients.create({
      name: 'Examples app',
      redirectUris: ['https://app.example.com/callback'],
      firstParty: true,
    });
    const user = await userWithPassword(atrium);
    const tokens = await codeFlowTokens(
      atrium,
      {
        client_id: app.client_id,
        client_secret: app.client_secret,
        redirect_uri: 'https://app.example.com/callback',
      },
      user,
    );
    const bearer = { authorization: `Bearer ${tokens.access_token}` };
    const service = await atrium.services.oauth.clients.create({ name: 'Orders job', scopes: 'orders:read' });
    const cc = await fetch(`${server.url}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(service.client_id, service.client_secret!),
      },
      body: form({ grant_type: 'client_credentials' }),
    });
    const lacking = { authorization: `Bearer ${((await cc.json()) as Json).access_token}` };

    // GET /api/user/profile
    expect((await call('GET', '/api/user/profile')).status).toBe(401);
    const byKey = await call('GET', '/api/user/profile', key);
    expect(byKey.status).toBe(200);
    expect(byKey.body.token_expires).toBeNull();
    const byToken = await call('GET', '/api/user/profile', bearer);
    expect(byToken.status).toBe(200);
    expect(byToken.body).toMatchObject({ user_id: user.id, scopes: ['data:export', 'profile:read'] });
    const noScope = await call('GET', '/api/user/profile', lacking);
    expect(noScope.status).toBe(403);
    expect(noScope.body.error).toBe('insufficient_scope');

    // POST /api/data/export: accepted, 202.
    expect((await call('POST', '/api/data/export')).status).toBe(401);
    const accepted = await call('POST', '/api/data/export', bearer);
    expect(accepted.status).toBe(202);
    expect(accepted.body).toEqual({ status: 'accepted', requested_by: user.id, client_id: app.client_id });
    const acceptedByKey = await call('POST', '/api/data/export', key);
    expect(acceptedByKey.status).toBe(202);
    expect(acceptedByKey.body.client_id).toBeNull();
    // A viewer's key carries the read scopes only.
    const viewer = await call('POST', '/api/data/export', viewerKey);
    expect(viewer.status).toBe(403);
    expect(viewer.body.error).toBe('insufficient_scope');
    const tokenWithout = await call('POST', '/api/data/export', lacking);
    expect(tokenWithout.status).toBe(403);

    // What Swagger UI would show as "Undocumented": a success status the document does not list.
    for (const [path, method, status] of [
      ['/api/user/profile', 'get', '200'],
      ['/api/data/export', 'post', '202'],
    ] as const) {
      const responses = doc.paths[path][method].responses as Json;
      const successes = Object.keys(responses).filter((s) => s.startsWith('2'));
      expect(successes, `${method} ${path}`).toEqual([status]);
    }
  });

  /**
   * The headers of HTTP itself (the framing, the connection, the date) and the body's type, which
   * the document states as the response's content. Every other header received must be declared.
   */
  const HTTP_OWN = new Set([
    'date',
    'connection',
    'keep-alive',
    'content-length',
    'transfer-encoding',
    'content-type',
  ]);

  /** Headers the walk below must meet, so that it checked something (Retry-After needs a 429). */
  const MET = [
    'x-request-id',
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'deprecation',
    'sunset',
    'link',
    'location',
    'www-authenticate',
    'cache-control',
    'vary',
    'etag',
    'last-modified',
    'x-cache',
    'idempotent-replayed',
    'x-content-type-options',
    'x-frame-options',
    'referrer-policy',
    'access-control-allow-origin',
    'access-control-allow-credentials',
    'access-control-expose-headers',
    'content-security-policy',
    'pragma',
    'set-cookie',
  ];

  it('declares, for the operation and status answered, every header received on a real answer from a page’s origin', async () => {
    const { atrium } = server;
    const key = (await atrium.caller()).headers;
    const product = await atrium.services.core.products.create({ name: 'Widget', priceCents: 1250 });
    const orderBody = JSON.stringify({
      items: [{ product_id: product.id, quantity: 1 }],
      currency: 'USD',
      shipping_address: { name: 'A', street: 'B 1', city: 'C', postal_code: 'SW1Y 4JH', country: 'GB' },
    });
    const json = { 'content-type': 'application/json' };
    const reader = await atrium.services.oauth.clients.create({ name: 'Reader', scopes: 'orders:read' });
    const cc = await fetch(`${server.url}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(reader.client_id, reader.client_secret!),
      },
      body: form({ grant_type: 'client_credentials' }),
    });
    const readOnly = { authorization: `Bearer ${((await cc.json()) as Json).access_token}` };

    const undeclared: string[] = [];
    const seen = new Set<string>();
    /** Sends the request as a page at ORIGIN would (with Origin), unless told another origin. */
    async function check(
      method: string,
      template: string,
      path: string,
      init: RequestInit & { headers?: Record<string, string> } = {},
    ) {
      const headers = { origin: ORIGIN, ...init.headers };
      const res = await fetch(`${server.url}${path}`, { ...init, method, headers, redirect: 'manual' });
      const text = await res.text();
      const operation = doc.paths[template]?.[method.toLowerCase()] as Json | undefined;
      expect(operation, `${method} ${template} is not in the document`).toBeDefined();
      const response = operation!.responses[String(res.status)] as Json | undefined;
      expect(response, `${method} ${path} ${res.status} is not documented: ${text}`).toBeDefined();
      const declared = new Set(Object.keys(response!.headers ?? {}).map((h) => h.toLowerCase()));
      for (const name of res.headers.keys()) {
        if (HTTP_OWN.has(name)) continue;
        seen.add(name);
        if (!declared.has(name)) undeclared.push(`${method} ${template} ${res.status}: ${name}`);
      }
      const json = res.headers.get('content-type')?.startsWith('application/json');
      return { res, body: json && text !== '' ? (JSON.parse(text) as Json) : undefined };
    }

    const orders2 = '/api/v2/orders';
    for (const v of ['v1', 'v2']) {
      const orders = `/api/${v}/orders`;
      const one = `${orders}/{order_id}`;
      await check('GET', orders, orders);
      await check('GET', orders, orders, { headers: { authorization: 'Bearer not-a-token' } });
      await check('GET', orders, `${orders}?limit=0`, { headers: key });
      await check('GET', orders, orders, { headers: key });
      const init = { headers: { ...key, ...json, 'idempotency-key': `k-${v}` }, body: orderBody };
      const created = await check('POST', orders, orders, init);
      expect(created.res.status).toBe(201);
      expect((await check('POST', orders, orders, init)).res.headers.get('idempotent-replayed')).toBe('true');
      await check('POST', orders, orders, { headers: readOnly, body: orderBody });
      const id = created.body!.id as string;
      const read = await check('GET', one, `${orders}/${id}`, { headers: key });
      await check('GET', one, `${orders}/${id}`, {
        headers: { ...key, 'if-none-match': read.res.headers.get('etag')! },
      });
      await check('GET', one, `${orders}/ord_00000000000000000000000000`, { headers: key });
      await check('GET', one, `${orders}/${id}`, { headers: readOnly });
    }
    const user = await atrium.caller();
    await check('GET', '/v1/users/{user_id}', `/v1/users/${user.userId}`, { headers: user.headers });

    const hooks = '/api/v2/webhook_endpoints';
    const endpoint = JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: ['*'] });
    const hook = await check('POST', hooks, hooks, { headers: { ...key, ...json }, body: endpoint });
    expect(hook.res.status).toBe(201);
    await check('GET', hooks, hooks, { headers: key });
    await check('GET', hooks, hooks, { headers: readOnly });

    const tokenForm = { 'content-type': 'application/x-www-form-urlencoded' };
    await check('POST', '/oauth/token', '/oauth/token', { headers: tokenForm, body: 'grant_type=password' });
    await check('POST', '/oauth/token', '/oauth/token', {
      headers: { ...tokenForm, authorization: basic(reader.client_id, 'wrong') },
      body: 'grant_type=client_credentials',
    });

    // The token server's pages: the sign-in form (its CSRF cookie), a redirect, an error page.
    const app = await atrium.services.oauth.clients.create({
      name: 'Page app',
      redirectUris: ['https://app.example.com/callback'],
    });
    const authorize = (query: Record<string, string>) =>
      `/authorize?${new URLSearchParams(query).toString()}`;
    const request = {
      response_type: 'code',
      client_id: app.client_id,
      redirect_uri: 'https://app.example.com/callback',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
    };
    expect((await check('GET', '/authorize', authorize(request))).res.status).toBe(200);
    const redirected = await check(
      'GET',
      '/authorize',
      authorize({ ...request, code_challenge_method: 'plain' }),
    );
    expect(redirected.res.status).toBe(302);
    expect(
      (await check('GET', '/authorize', authorize({ ...request, client_id: 'nobody' }))).res.status,
    ).toBe(400);
    // From an origin not in CORS_ORIGINS: the same answer without the CORS headers.
    const other = await check('GET', orders2, orders2, {
      headers: { ...key, origin: 'https://evil.example.net' },
    });
    expect(other.res.headers.get('access-control-allow-origin')).toBeNull();

    expect(undeclared).toEqual([]);
    // The walk met each of them, so it checked something.
    expect(MET.filter((name) => !seen.has(name))).toEqual([]);
  });

  it('describes the CORS preflight, which no operation lists, as a listed origin gets it', async () => {
    const description = (doc.info.description as string).toLowerCase();
    for (const [path, method] of [
      ['/api/v2/orders', 'POST'],
      ['/v1/users/usr_x', 'PATCH'],
      ['/oauth/token', 'POST'],
    ]) {
      const res = await fetch(`${server.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: ORIGIN,
          'access-control-request-method': method!,
          'access-control-request-headers': 'authorization, content-type',
        },
      });
      expect(res.status, path).toBe(204);
      const names = [...res.headers.keys()].filter((name) => !HTTP_OWN.has(name));
      expect(names).toContain('access-control-allow-methods');
      for (const name of names) {
        expect(description, `${path}: ${name}`).toContain(`\`${name}`);
        // A header the description gives a value for has that value.
        if (description.includes(`\`${name}: `)) {
          expect(description, path).toContain(`\`${name}: ${res.headers.get(name)!.toLowerCase()}\``);
        }
      }
    }
    const refused = await fetch(`${server.url}/api/v2/orders`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'POST' },
    });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as Json).error).toBe('forbidden');
    expect(description).toContain('403 `forbidden`');
  });
});
