import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORS_EXPOSED_HEADERS } from '../../../src/http/cors.js';
import { SECURITY_HEADERS } from '../../../src/http/plugins/request-context.js';
import { type OAuthTestServer, startOAuthServer } from '../oauth/support.js';

/**
 * The headers every answer of the HTTP server carries (docs/rest.md: X-Request-Id and the security
 * headers on every response; CORS on every route, `/graphql` included), on the answers that are no
 * operation of /openapi.json and so escape docs.test.ts's walk over its operations: the document
 * and docs pages, GraphQL and its event streams, the probes and metrics, the sign-in pages, and the
 * refusals (404, 405, 406, 413, 415). Each is asked over a socket twice: from a listed origin, with a
 * client X-Request-Id, and from an unlisted one.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ORIGIN = 'https://app.example.com';
const UNLISTED = 'https://evil.example.net';
const CORS_HEADERS = [
  'access-control-allow-origin',
  'access-control-allow-credentials',
  'access-control-expose-headers',
];

/** What an answer's body must be: the error shape of its API, or a page or file of a given type. */
type Shape = 'rest-error' | 'graphql-error' | 'oauth-page' | { type: RegExp };

interface Case {
  method: string;
  path: string;
  status: number;
  shape: Shape;
  headers?: Record<string, string>;
  body?: string;
  /** The sign-in pages keep their own (same-origin, docs/oauth.md); every other answer the common one. */
  referrerPolicy?: string;
  /** A header the answer must carry besides the common ones (Allow on a 405). */
  also?: Record<string, string>;
}

const json = { 'content-type': 'application/json' };
const query = JSON.stringify({ query: '{ __typename }' });
/** Just over BODY_LIMIT_BYTES: read and dropped, the connection kept (docs/rest.md). */
const overLimit = 'x'.repeat(1024 * 1024 + 16);

let counter = 0;

async function expectCommonHeaders(server: OAuthTestServer, c: Case): Promise<void> {
  const where = `${c.method} ${c.path}`;
  for (const origin of [ORIGIN, UNLISTED]) {
    const requestId = `walk-${++counter}`;
    const res = await fetch(`${server.url}${c.path}`, {
      method: c.method,
      headers: { ...c.headers, origin, 'x-request-id': requestId },
      body: c.body,
      redirect: 'manual',
    });
    const text = await res.text();
    const at = `${where} from ${origin}: ${res.status} ${text.slice(0, 200)}`;
    expect(res.status, at).toBe(c.status);
    expect(res.headers.get('x-request-id'), at).toBe(requestId);
    expect(res.headers.get('x-content-type-options'), at).toBe(SECURITY_HEADERS['x-content-type-options']);
    expect(res.headers.get('x-frame-options'), at).toBe(SECURITY_HEADERS['x-frame-options']);
    expect(res.headers.get('referrer-policy'), at).toBe(
      c.referrerPolicy ?? SECURITY_HEADERS['referrer-policy'],
    );
    // Vary: Origin either way, so a cache never hands one origin's answer to the other.
    expect(res.headers.get('vary')?.split(/,\s*/), at).toContain('Origin');
    if (origin === ORIGIN) {
      expect(res.headers.get('access-control-allow-origin'), at).toBe(ORIGIN);
      expect(res.headers.get('access-control-allow-credentials'), at).toBe('true');
      expect(res.headers.get('access-control-expose-headers'), at).toBe(CORS_EXPOSED_HEADERS.join(', '));
    } else {
      for (const name of CORS_HEADERS) expect(res.headers.get(name), `${at}: ${name}`).toBeNull();
    }
    for (const [name, value] of Object.entries(c.also ?? {})) expect(res.headers.get(name), at).toBe(value);
    expectShape(c.shape, res, text, requestId, at);
  }
}

function expectShape(shape: Shape, res: Response, text: string, requestId: string, at: string): void {
  const type = res.headers.get('content-type') ?? '';
  if (typeof shape === 'object') {
    expect(type, at).toMatch(shape.type);
    return;
  }
  if (shape === 'oauth-page') {
    expect(type, at).toMatch(/^text\/html; charset=utf-8$/);
    return;
  }
  expect(type, at).toMatch(/^application\/json; charset=utf-8$/);
  const body = JSON.parse(text) as Json;
  if (shape === 'rest-error') {
    expect(body, at).toEqual({
      error: expect.any(String),
      message: expect.any(String),
      request_id: requestId,
      details: expect.any(Array),
    });
    return;
  }
  expect(body, at).toEqual({ errors: expect.any(Array) });
  expect(body.errors.length, at).toBeGreaterThan(0);
  for (const error of body.errors as Json[]) {
    expect(error, at).toMatchObject({
      message: expect.any(String),
      extensions: { code: expect.any(String) },
    });
  }
}

describe('the common headers on every answer outside the document’s operations', () => {
  let server: OAuthTestServer;
  let key: Record<string, string>;

  beforeAll(async () => {
    server = await startOAuthServer({ CORS_ORIGINS: ORIGIN });
    key = (await server.atrium.caller()).headers;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('on the document and the docs pages, with the assets they load', async () => {
    await expectCommonHeaders(server, {
      method: 'GET',
      path: '/openapi.json',
      status: 200,
      shape: { type: /^application\/json/ },
    });
    for (const path of ['/docs', '/redoc']) {
      const page = await fetch(`${server.url}${path}`);
      const html = await page.text();
      await expectCommonHeaders(server, { method: 'GET', path, status: 200, shape: { type: /^text\/html/ } });
      // Every script the page loads, as the browser asks for it.
      const scripts = [...html.matchAll(/<script src="([^"]+)"/g)].map(
        (m) => new URL(m[1]!, page.url).pathname,
      );
      expect(scripts.length, path).toBeGreaterThan(0);
      for (const script of scripts) {
        await expectCommonHeaders(server, {
          method: 'GET',
          path: script,
          status: 200,
          shape: { type: /^application\/javascript/ },
        });
      }
    }
    await expectCommonHeaders(server, {
      method: 'GET',
      path: '/docs/static/swagger-ui.css',
      status: 200,
      shape: { type: /^text\/css/ },
    });
    await expectCommonHeaders(server, {
      method: 'GET',
      path: '/docs/static/nonexistent.js',
      status: 404,
      shape: 'rest-error',
    });
  });

  it('on GraphQL over HTTP, GraphiQL and the event streams, refusals included', async () => {
    const cases: Case[] = [
      {
        method: 'POST',
        path: '/graphql',
        status: 200,
        shape: { type: /^application\/json/ },
        headers: json,
        body: query,
      },
      {
        method: 'GET',
        path: '/graphql?query=%7B__typename%7D',
        status: 200,
        shape: { type: /^application\/json/ },
      },
      // GraphiQL, outside production.
      {
        method: 'GET',
        path: '/graphql',
        status: 200,
        shape: { type: /^text\/html/ },
        headers: { accept: 'text/html' },
      },
      // An Accept naming nothing /graphql answers with: refused before the operation runs.
      {
        method: 'GET',
        path: '/graphql?query=%7B__typename%7D',
        status: 406,
        shape: 'graphql-error',
        headers: { accept: 'text/plain' },
      },
      {
        method: 'POST',
        path: '/graphql',
        status: 406,
        shape: 'graphql-error',
        headers: { ...json, accept: 'text/plain' },
        body: query,
      },
      {
        method: 'POST',
        path: '/graphql',
        status: 415,
        shape: 'graphql-error',
        headers: { 'content-type': 'text/plain' },
        body: 'x',
      },
      {
        method: 'POST',
        path: '/graphql',
        status: 413,
        shape: 'graphql-error',
        headers: json,
        body: overLimit,
      },
      {
        method: 'GET',
        path: '/graphql?query=subscription%7BcommentAdded(postId:%22p%22)%7Bid%7D%7D',
        status: 405,
        shape: 'graphql-error',
        also: { allow: 'POST' },
      },
      {
        method: 'POST',
        path: '/graphql/stream',
        status: 200,
        shape: { type: /^text\/event-stream/ },
        headers: { ...json, accept: 'text/event-stream' },
        body: query,
      },
      { method: 'GET', path: '/graphql/stream', status: 400, shape: 'graphql-error' },
      {
        method: 'PUT',
        path: '/graphql/stream',
        status: 405,
        shape: 'graphql-error',
        also: { allow: 'GET, POST' },
      },
      {
        method: 'GET',
        path: '/graphql/stream?query=%7B__typename%7D',
        status: 406,
        shape: 'graphql-error',
        headers: { accept: 'application/json' },
      },
      {
        method: 'POST',
        path: '/graphql/stream',
        status: 415,
        shape: 'graphql-error',
        headers: { 'content-type': 'text/plain' },
        body: query,
      },
    ];
    for (const c of cases) await expectCommonHeaders(server, c);
  });

  it('on the REST refusals no operation lists: 404, 405, and 413 and 415 before the body is used', async () => {
    const cases: Case[] = [
      { method: 'GET', path: '/nope', status: 404, shape: 'rest-error' },
      {
        method: 'PUT',
        path: '/api/v2/orders',
        status: 405,
        shape: 'rest-error',
        also: { allow: 'GET, HEAD, POST' },
      },
      {
        method: 'POST',
        path: '/api/v2/orders',
        status: 415,
        shape: 'rest-error',
        headers: { ...key, 'content-type': 'text/plain' },
        body: 'x',
      },
      {
        method: 'POST',
        path: '/api/v2/orders',
        status: 413,
        shape: 'rest-error',
        headers: { ...key, ...json },
        body: overLimit,
      },
    ];
    for (const c of cases) await expectCommonHeaders(server, c);
    // A HEAD's 404 carries the same headers, and no body.
    const head = await fetch(`${server.url}/nope`, { method: 'HEAD', headers: { origin: ORIGIN } });
    expect(head.status).toBe(404);
    expect(head.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(head.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await head.text()).toBe('');
  });

  it('on the probes, the metrics and the sign-in pages', async () => {
    const cases: Case[] = [
      { method: 'GET', path: '/healthz', status: 200, shape: { type: /^application\/json/ } },
      { method: 'GET', path: '/readyz', status: 200, shape: { type: /^application\/json/ } },
      { method: 'GET', path: '/metrics', status: 200, shape: { type: /^text\/plain/ } },
    ];
    for (const c of cases) await expectCommonHeaders(server, c);

    const app = await server.atrium.services.oauth.clients.create({
      name: 'Walk app',
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
    const page = { shape: 'oauth-page' as const, referrerPolicy: 'same-origin' };
    await expectCommonHeaders(server, { method: 'GET', path: authorize(request), status: 200, ...page });
    await expectCommonHeaders(server, {
      method: 'GET',
      path: authorize({ ...request, client_id: 'nobody' }),
      status: 400,
      ...page,
    });
  });
});

describe('the common headers in production', () => {
  let server: OAuthTestServer;

  beforeAll(async () => {
    server = await startOAuthServer({ CORS_ORIGINS: ORIGIN, NODE_ENV: 'production' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('on GET /graphql asking for a page, which production does not serve: a GraphQL error in JSON, not a bare null', async () => {
    // No GraphiQL here, and no ad-hoc query: the request's own error, in the shape every GraphQL
    // error has, though text/html is not JSON (until 2026-11-29 Yoga's 406 with the body `null`).
    await expectCommonHeaders(server, {
      method: 'GET',
      path: '/graphql',
      status: 400,
      shape: 'graphql-error',
      headers: { accept: 'text/html' },
    });
  });
});
