import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/schema.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

const ALLOWED = 'https://app.example.com';
const ALSO_ALLOWED = 'http://localhost:5173';
const EVIL = 'https://evil.example.net';

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'strict-origin-when-cross-origin',
};

const preflight = (origin: string, url = '/api/v2/orders', method = 'POST') => ({
  method: 'OPTIONS' as const,
  url,
  headers: {
    origin,
    'access-control-request-method': method,
    'access-control-request-headers': 'authorization, content-type, idempotency-key',
  },
});

describe('CORS and security headers', () => {
  let atrium: TestAtrium;
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startTestAtrium({ CORS_ORIGINS: `${ALLOWED},${ALSO_ALLOWED}` });
    caller = await atrium.caller();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('answers a preflight from a listed origin with the allowed methods, headers and a day of caching', async () => {
    for (const origin of [ALLOWED, ALSO_ALLOWED]) {
      const res = await atrium.http!.inject(preflight(origin));
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(res.headers['access-control-allow-origin']).toBe(origin);
      expect(res.headers['access-control-allow-credentials']).toBe('true');
      expect(res.headers['access-control-allow-methods']).toBe('GET, POST, PUT, PATCH, DELETE, OPTIONS');
      expect(res.headers['access-control-allow-headers']).toBe(
        'Authorization, Content-Type, X-API-Key, Idempotency-Key, If-Match, If-Unmodified-Since, ' +
          'If-None-Match, If-Modified-Since, X-Request-Id, Apollographql-Client-Name, ' +
          'Apollographql-Client-Version, Traceparent, Tracestate',
      );
      expect(res.headers['access-control-max-age']).toBe('86400');
      expect(String(res.headers.vary)).toMatch(/Origin/);
      expect(res.headers).toMatchObject(SECURITY_HEADERS);
    }
  });

  it('answers preflights for any API path, including ones that need credentials', async () => {
    for (const url of [`/v1/users/${caller.userId}`, '/api/v1/orders/ord_x/cancel', '/openapi.json']) {
      const res = await atrium.http!.inject(preflight(ALLOWED, url, 'PATCH'));
      expect(res.statusCode).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
    }
  });

  it('refuses a preflight from an unlisted origin with 403 and no CORS headers', async () => {
    for (const origin of [EVIL, 'null', `${ALLOWED}.evil.net`, 'https://APP.example.com', `${ALLOWED}:443`]) {
      const res = await atrium.http!.inject(preflight(origin));
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ error: 'forbidden', request_id: res.headers['x-request-id'] });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(res.headers['access-control-allow-methods']).toBeUndefined();
      expect(res.headers).toMatchObject(SECURITY_HEADERS);
    }
  });

  it('lets a listed origin read the response and its headers, never with a wildcard', async () => {
    const res = await atrium.http!.inject({
      method: 'GET',
      url: `/v1/users/${caller.userId}`,
      headers: { ...caller.headers, origin: ALLOWED },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    // The whole list, written out here rather than read from CORS_EXPOSED_HEADERS, so dropping a
    // header from the code (or adding one) fails this test; order does not matter to a browser.
    const exposed = String(res.headers['access-control-expose-headers']).split(', ');
    expect([...exposed].sort()).toEqual(
      [
        'X-RateLimit-Limit',
        'X-RateLimit-Remaining',
        'X-RateLimit-Reset',
        'Retry-After',
        'ETag',
        'Location',
        'Idempotent-Replayed',
        'X-Request-Id',
        'Deprecation',
        'Sunset',
        'Link',
        'X-Cache',
        'WWW-Authenticate',
      ].sort(),
    );
    const vary = String(res.headers.vary);
    expect(vary).toMatch(/Origin/);
    expect(vary).toMatch(/X-API-Key/);
  });

  it('serves other origins (servers send Origin too) but without CORS headers, so browsers hide it', async () => {
    const res = await atrium.http!.inject({
      method: 'GET',
      url: `/v1/users/${caller.userId}`,
      headers: { ...caller.headers, origin: EVIL },
    });
    expect(res.statusCode).toBe(200);
    for (const h of Object.keys(res.headers)) expect(h.startsWith('access-control-')).toBe(false);
    expect(String(res.headers.vary)).toMatch(/Origin/);
  });

  it('sends no CORS headers without an Origin', async () => {
    const res = await atrium.http!.inject({
      method: 'GET',
      url: `/v1/users/${caller.userId}`,
      headers: caller.headers,
    });
    for (const h of Object.keys(res.headers)) expect(h.startsWith('access-control-')).toBe(false);
  });

  it('adds the CORS headers to error responses too, so a browser can read a 401 or 429', async () => {
    const res = await atrium.http!.inject({
      method: 'GET',
      url: `/v1/users/${caller.userId}`,
      headers: { origin: ALLOWED },
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
  });

  it('a URL the router refuses (bad percent-encoding) keeps the CORS and v1 deprecation headers', async () => {
    for (const url of ['/api/v1/orders/%ZZ', '/api/v2/orders/%ZZ', '/v1/users/%ZZ']) {
      const listed = await atrium.http!.inject({
        method: 'GET',
        url,
        headers: { ...caller.headers, origin: ALLOWED },
      });
      expect(listed.statusCode).toBe(400);
      expect(listed.json()).toMatchObject({
        error: expect.stringMatching(/^validation_error$/i),
        request_id: expect.any(String),
      });
      expect(listed.headers['access-control-allow-origin']).toBe(ALLOWED);
      expect(listed.headers['access-control-allow-credentials']).toBe('true');
      expect(String(listed.headers['access-control-expose-headers'])).toContain('X-Request-Id');
      expect(listed.headers).toMatchObject(SECURITY_HEADERS);
      const unlisted = await atrium.http!.inject({
        method: 'GET',
        url,
        headers: { ...caller.headers, origin: EVIL },
      });
      expect(unlisted.statusCode).toBe(400);
      expect(Object.keys(unlisted.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      const v1 = url.startsWith('/api/v1/');
      for (const res of [listed, unlisted]) {
        expect(res.headers.deprecation).toBe(v1 ? 'true' : undefined);
        expect(res.headers.link).toBe(v1 ? '</api/v2/orders/%ZZ>; rel="successor-version"' : undefined);
        expect(res.headers.sunset === undefined).toBe(!v1);
      }
    }
  });

  it('puts the three security headers on API responses of every kind', async () => {
    const responses = [
      await atrium.http!.inject({
        method: 'GET',
        url: `/v1/users/${caller.userId}`,
        headers: caller.headers,
      }),
      await atrium.http!.inject({ method: 'GET', url: '/api/v2/orders', headers: caller.headers }),
      await atrium.http!.inject({ method: 'GET', url: `/v1/users/${caller.userId}` }),
      await atrium.http!.inject({
        method: 'PATCH',
        url: `/v1/users/${caller.userId}`,
        headers: caller.headers,
      }),
      await atrium.http!.inject({
        method: 'GET',
        url: '/v1/users/usr_missing00000000000000000',
        headers: caller.headers,
      }),
      await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${caller.userId}/verify`,
        headers: caller.headers,
      }),
      await atrium.http!.inject({ method: 'GET', url: '/no/such/route' }),
      await atrium.http!.inject({ method: 'GET', url: '/openapi.json' }),
      await atrium.http!.inject({ method: 'GET', url: '/docs' }),
      await atrium.http!.inject({ method: 'GET', url: '/redoc' }),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 401, 403, 404, 204, 404, 200, 200, 200]);
    for (const res of responses) expect(res.headers).toMatchObject(SECURITY_HEADERS);
  });
});

describe('CORS on /graphql: the same rules as every other route', () => {
  let atrium: TestAtrium;
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startTestAtrium({ CORS_ORIGINS: ALLOWED });
    caller = await atrium.caller();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  /** The GraphQL answers a browser script could ask for: POST (JSON and not), GET, errors. */
  const graphqlRequests = (origin: string) => [
    {
      method: 'POST' as const,
      url: '/graphql',
      headers: { origin, 'content-type': 'application/json', ...caller.headers },
      payload: JSON.stringify({ query: '{ me { id } }' }),
    },
    {
      method: 'POST' as const,
      url: '/graphql',
      headers: { origin, 'content-type': 'application/json' },
      payload: JSON.stringify({ query: '{ me { id } }' }),
    },
    { method: 'GET' as const, url: '/graphql?query=%7B__typename%7D', headers: { origin } },
    {
      method: 'POST' as const,
      url: '/graphql',
      headers: { origin, 'content-type': 'text/plain' },
      payload: '{"query":"{ __typename }"}',
    },
    { method: 'GET' as const, url: '/graphql?query=%7B', headers: { origin } },
  ];

  it('answers an unlisted origin without CORS headers, so browsers hide the answer', async () => {
    const responses = await Promise.all(graphqlRequests(EVIL).map((r) => atrium.http!.inject(r)));
    expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 415, 200]);
    for (const res of responses) {
      expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      expect(res.headers).toMatchObject(SECURITY_HEADERS);
    }
  });

  it('lets a listed origin read every answer, its own origin echoed with credentials', async () => {
    const responses = await Promise.all(graphqlRequests(ALLOWED).map((r) => atrium.http!.inject(r)));
    expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 415, 200]);
    for (const res of responses) {
      expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
      expect(res.headers['access-control-allow-credentials']).toBe('true');
      expect(String(res.headers['access-control-expose-headers'])).toContain('X-Request-Id');
    }
  });

  it('refuses a preflight for /graphql from an unlisted origin, answers a listed one', async () => {
    const refused = await atrium.http!.inject(preflight(EVIL, '/graphql'));
    expect(refused.statusCode).toBe(403);
    expect(refused.headers['access-control-allow-origin']).toBeUndefined();
    const allowed = await atrium.http!.inject(preflight(ALLOWED, '/graphql'));
    expect(allowed.statusCode).toBe(204);
    expect(allowed.headers['access-control-allow-origin']).toBe(ALLOWED);
  });
});

describe('CORS with no origins configured', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    atrium = await startTestAtrium();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('allows no origin at all', async () => {
    const res = await atrium.http!.inject(preflight(ALLOWED));
    expect(res.statusCode).toBe(403);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('sends no CORS headers from /graphql either', async () => {
    const res = await atrium.http!.inject({
      method: 'GET',
      url: '/graphql?query=%7B__typename%7D',
      headers: { origin: ALLOWED },
    });
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });
});

describe('CORS_ORIGINS', () => {
  it('refuses a wildcard or anything that is not an exact origin', () => {
    for (const value of [
      '*',
      `${ALLOWED},*`,
      'https://app.example.com/',
      'app.example.com',
      'ftp://x.example',
    ]) {
      expect(() => parseConfig({ CORS_ORIGINS: value })).toThrow(/CORS_ORIGINS/);
    }
  });
});
