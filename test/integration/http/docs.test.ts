import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../../src/auth/scopes.js';
import { UpdateUserBody } from '../../../src/http/rest/users/schemas.js';
import { type RouteModule, ROUTE_MODULES } from '../../../src/http/routes.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

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

  it('describes the service: info, the public server and the ErrorBody component', () => {
    expect(doc.info).toMatchObject({ title: 'Atrium API', version: expect.any(String) });
    expect(doc.servers).toEqual([{ url: PUBLIC_URL }]);
    expect(doc.components.schemas.ErrorBody).toMatchObject({
      type: 'object',
      required: ['error', 'message', 'request_id', 'details'],
    });
    expect(doc.components.schemas.ErrorDetail.required).toEqual(['field', 'message', 'code']);
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

  it('documents 401, 429 and the rate-limit headers on every secured operation', () => {
    const secured = operations(doc).filter(({ op }) =>
      (op.security ?? []).some((r: Json) => Object.keys(r).length > 0),
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
    const onDisk = readFileSync(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'));
    expect(script.rawPayload.equals(onDisk)).toBe(true);
  });
});
