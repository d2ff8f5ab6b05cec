import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { rawRequest } from '../../helpers/raw-http.js';
import { call } from '../../helpers/rest-client.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';

/** Rules every REST route shares, seen on the wire of a listening server. */
let atrium: TestAtrium;
let base: string;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium();
  base = (await atrium.listen()).httpUrl!;
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
});

async function newOrder(headers: Record<string, string>): Promise<string> {
  const created = await call(base, 'POST', '/api/v2/orders', { headers, json: orderBody(catalogue) });
  expect(created.status).toBe(201);
  return String(created.body!.id);
}

describe('304 Not Modified', () => {
  it.each(['v2', 'v1'])(
    'on %s carries ETag, Cache-Control, Last-Modified and no body, type or length',
    async (v) => {
      const who = await atrium.caller();
      const id = await newOrder(who.headers);
      const path = `/api/${v}/orders/${id}`;
      const first = await call(base, 'GET', path, { headers: who.headers });
      expect(first.status).toBe(200);
      const etag = first.headers.get('etag')!;
      for (const [method, condition] of [
        ['GET', `If-None-Match: ${etag}`],
        ['HEAD', `If-None-Match: ${etag}`],
        ['GET', `If-Modified-Since: ${first.headers.get('last-modified')!}`],
      ] as const) {
        const res = await rawRequest(
          base,
          `${method} ${path} HTTP/1.1\r\nHost: ${new URL(base).host}\r\nX-API-Key: ${who.key}\r\n${condition}\r\nConnection: close\r\n\r\n`,
        );
        expect(res.status, method).toBe(304);
        expect(res.body).toBe('');
        expect(res.headers).toMatchObject({
          etag,
          'cache-control': 'private, max-age=60',
          'last-modified': first.headers.get('last-modified'),
        });
        expect(res.headers).not.toHaveProperty('content-type');
        expect(res.headers).not.toHaveProperty('content-length');
        expect(res.headers).not.toHaveProperty('transfer-encoding');
      }
    },
  );
});

describe('the user API’s upper case goes by path, for errors raised before any handler too', () => {
  it('PATCH /v1/users/{id}: text/plain is 415 UNSUPPORTED_MEDIA_TYPE, over 1 MiB 413 PAYLOAD_TOO_LARGE', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const path = `/v1/users/${admin.userId}`;
    const text = await call(base, 'PATCH', path, {
      headers: { ...admin.headers, 'content-type': 'text/plain' },
      raw: 'name=Ada',
    });
    expect(text.status).toBe(415);
    expect(text.body).toMatchObject({ error: 'UNSUPPORTED_MEDIA_TYPE' });
    const big = await call(base, 'PATCH', path, {
      headers: admin.headers,
      json: { name: 'x'.repeat(1024 * 1024 + 1) },
    });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ error: 'PAYLOAD_TOO_LARGE' });
    // The same path's other request errors, as before.
    const malformed = await call(base, 'PATCH', path, {
      headers: { ...admin.headers, 'content-type': 'application/json' },
      raw: '{"name":',
    });
    expect(malformed.body).toMatchObject({ error: 'VALIDATION_ERROR' });
    expect((await call(base, 'GET', `${path}/nothing`, { headers: admin.headers })).body).toMatchObject({
      error: 'NOT_FOUND',
    });
  });

  it('the order API keeps lower case for the same errors', async () => {
    const who = await atrium.caller();
    const text = await call(base, 'POST', '/api/v2/orders', {
      headers: { ...who.headers, 'content-type': 'text/plain' },
      raw: 'x',
    });
    expect(text.body).toMatchObject({ error: 'unsupported_media_type' });
  });
});

describe('integer query parameters are decimal', () => {
  it('limit=0x10, 1e1, 0b11, 0o7 and " 5" are refused naming limit, on every list; 16 and 007 pass', async () => {
    const who = await atrium.caller();
    const endpoint = await call(base, 'POST', '/api/v2/webhook_endpoints', {
      headers: who.headers,
      json: { url: 'http://127.0.0.1:9/hook' },
    });
    const hook = `/api/v2/webhook_endpoints/${String(endpoint.body!.id)}`;
    const lists = [
      '/api/v2/orders',
      '/api/v1/orders',
      `/v1/users/${who.userId}/orders`,
      '/api/v2/webhook_endpoints',
      `${hook}/deliveries`,
      `${hook}/attempts`,
    ];
    for (const list of lists) {
      for (const bad of ['0x10', '1e1', '0b11', '0o7', ' 5', '1.5', 'abc']) {
        const res = await call(base, 'GET', `${list}?limit=${encodeURIComponent(bad)}`, {
          headers: who.headers,
        });
        expect(res.status, `${list} limit=${bad}`).toBe(400);
        const body = res.body as { error: string; details: Array<{ field: string; code: string }> };
        expect(body.error.toLowerCase()).toBe('validation_error');
        expect(body.details).toEqual([expect.objectContaining({ field: 'limit', code: 'invalid_type' })]);
      }
      for (const good of ['16', '007']) {
        const res = await call(base, 'GET', `${list}?limit=${good}`, { headers: who.headers });
        expect(res.status, `${list} limit=${good}`).toBe(200);
        expect((res.body as { pagination: { limit: number } }).pagination.limit).toBe(Number(good));
      }
    }
  });
});

describe('a wrong method on a path that exists', () => {
  it('is 405 method_not_allowed with Allow, in the path’s error case; an unknown path stays 404', async () => {
    const who = await atrium.caller();
    const id = await newOrder(who.headers);
    const cases: Array<[string, string, string, string]> = [
      ['PUT', '/api/v2/orders', 'GET, HEAD, POST', 'method_not_allowed'],
      ['PATCH', '/api/v2/orders', 'GET, HEAD, POST', 'method_not_allowed'],
      ['DELETE', '/api/v2/orders', 'GET, HEAD, POST', 'method_not_allowed'],
      ['GET', `/api/v2/orders/${id}/cancel`, 'POST', 'method_not_allowed'],
      ['POST', `/api/v1/orders/${id}`, 'GET, HEAD, PUT, PATCH, DELETE', 'method_not_allowed'],
      ['PUT', `/v1/users/${who.userId}`, 'GET, HEAD, PATCH', 'METHOD_NOT_ALLOWED'],
      ['DELETE', `/v1/users/${who.userId}/orders?limit=2`, 'GET, HEAD', 'METHOD_NOT_ALLOWED'],
    ];
    for (const [method, path, allow, error] of cases) {
      const res = await call(base, method, path, { headers: who.headers });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow')).toBe(allow);
      const body = res.body as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'request_id']);
      expect(body.error).toBe(error);
      expect(body.message).toContain(`${method} is not allowed`);
      expect(res.headers.get('x-request-id')).toBe(body.request_id);
    }
    const v1 = await call(base, 'POST', `/api/v1/orders/${id}`, { headers: who.headers });
    expect(v1.headers.get('deprecation')).toBe('true');

    const unknown = await call(base, 'GET', '/api/v2/nothing-here', { headers: who.headers });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('allow')).toBeNull();
    expect((await call(base, 'PUT', '/v1/users/x/y/z', { headers: who.headers })).body).toMatchObject({
      error: 'NOT_FOUND',
    });
  });
});

describe('a plain OPTIONS (no CORS preflight)', () => {
  it('is 204 with Allow listing the path’s methods and OPTIONS; an unknown path stays 404', async () => {
    const who = await atrium.caller();
    const id = await newOrder(who.headers);
    const cases: Array<[string, string]> = [
      ['/api/v2/orders', 'GET, HEAD, POST, OPTIONS'],
      [`/api/v2/orders/${id}`, 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS'],
      [`/api/v2/orders/${id}/cancel`, 'POST, OPTIONS'],
      [`/v1/users/${who.userId}`, 'GET, HEAD, PATCH, OPTIONS'],
    ];
    for (const [path, allow] of cases) {
      for (const headers of [{}, who.headers]) {
        const res = await call(base, 'OPTIONS', path, { headers });
        expect(res.status, path).toBe(204);
        expect(res.headers.get('allow')).toBe(allow);
        expect(res.text).toBe('');
      }
    }
    expect((await call(base, 'OPTIONS', '/api/v2/nothing-here')).status).toBe(404);
  });
});

describe('a key that would set a prototype', () => {
  it('is 400 naming the key (forbidden_key), not called malformed JSON', async () => {
    const who = await atrium.caller();
    const admin = await atrium.caller({ role: 'admin' });
    const cases: Array<[string, string, Record<string, string>, string, string, string]> = [
      [
        'POST',
        '/api/v2/orders',
        who.headers,
        '{"__proto__":{"admin":true}}',
        '__proto__',
        'validation_error',
      ],
      [
        'POST',
        '/api/v2/orders',
        who.headers,
        '{"items":[{"product_id":"p","__proto__":{}}]}',
        'items[0].__proto__',
        'validation_error',
      ],
      [
        'POST',
        '/api/v2/webhook_endpoints',
        who.headers,
        '{"url":"http://127.0.0.1:9/","constructor":{"prototype":{"x":1}}}',
        'constructor.prototype',
        'validation_error',
      ],
      [
        'PATCH',
        `/v1/users/${admin.userId}`,
        admin.headers,
        '{"__proto__":{}}',
        '__proto__',
        'VALIDATION_ERROR',
      ],
    ];
    for (const [method, path, headers, raw, field, error] of cases) {
      const res = await call(base, method, path, {
        headers: { ...headers, 'content-type': 'application/json' },
        raw,
      });
      expect(res.status, raw).toBe(400);
      expect(res.body).toMatchObject({
        error,
        message: `The request body has a key that is not allowed: ${field}.`,
        details: [
          { field, code: 'forbidden_key', message: expect.stringContaining(`${field} is not allowed`) },
        ],
      });
    }
    const malformed = await call(base, 'POST', '/api/v2/orders', {
      headers: { ...who.headers, 'content-type': 'application/json' },
      raw: '{"__proto__":',
    });
    expect(malformed.body).toMatchObject({ details: [{ code: 'invalid_json' }] });
  });
});

describe('a PATCH that changes nothing', () => {
  it('answers 200 with the resource as it is and writes nothing (updated_at, events), on every resource', async () => {
    const who = await atrium.caller();
    const admin = await atrium.caller({ role: 'admin' });
    const id = await newOrder(who.headers);
    const hook = await call(base, 'POST', '/api/v2/webhook_endpoints', {
      headers: who.headers,
      json: { url: 'http://127.0.0.1:9/hook', events: ['order.created'] },
    });
    const eventsOf = async () =>
      (
        await atrium.services.store.db
          .selectFrom('events')
          .select('id')
          .where('owner_id', '=', who.userId)
          .execute()
      ).length;
    const cases: Array<[string, Record<string, string>, unknown]> = [
      [`/api/v2/orders/${id}`, who.headers, {}],
      [`/api/v2/orders/${id}`, who.headers, { currency: 'USD' }],
      [`/api/v1/orders/${id}`, who.headers, {}],
      [`/api/v2/webhook_endpoints/${String(hook.body!.id)}`, who.headers, {}],
      [`/api/v2/webhook_endpoints/${String(hook.body!.id)}`, who.headers, { events: ['order.created'] }],
      [`/v1/users/${who.userId}`, admin.headers, {}],
    ];
    for (const [path, headers, json] of cases) {
      const before = await call(base, 'GET', path, { headers });
      const events = await eventsOf();
      const res = await call(base, 'PATCH', path, { headers, json });
      expect(res.status, `PATCH ${path} ${JSON.stringify(json)}: ${res.text}`).toBe(200);
      expect(res.body).toEqual(before.body);
      expect((await call(base, 'GET', path, { headers })).body).toEqual(before.body);
      expect(await eventsOf()).toBe(events);
    }
    // Something that does change still does.
    const changed = await call(base, 'PATCH', `/api/v2/orders/${id}`, {
      headers: who.headers,
      json: { currency: 'EUR' },
    });
    expect(changed.body).toMatchObject({ currency: 'EUR' });
  });
});

describe('an empty path segment (a trailing slash)', () => {
  it('is 404 not_found like any path with no route, not a field error', async () => {
    const who = await atrium.caller({ role: 'admin' });
    for (const path of [
      '/api/v2/orders/',
      '/api/v1/orders/',
      '/v1/users/',
      '/v1/organizations/',
      '/api/v2/webhook_endpoints/',
    ]) {
      const res = await fetch(`${base}${path}`, { headers: who.headers });
      expect({ path, status: res.status, body: await res.json() }).toMatchObject({
        path,
        status: 404,
        body: { error: expect.stringMatching(/^not_found$/i), message: 'No such route or resource.' },
      });
    }
  });
});

describe('refusals by a published pattern, in the core’s words, over the wire', () => {
  it('a coupon code that upper-cases onto ASCII and a blank name: one detail each, as the core words it', async () => {
    const who = await atrium.caller();
    const coupon = await call(base, 'POST', '/api/v2/orders', {
      headers: who.headers,
      json: orderBody(catalogue, { coupon_code: 'teno\ufb00' }),
    });
    expect(coupon.status).toBe(400);
    expect(coupon.body!.details).toEqual([
      {
        field: 'coupon_code',
        message: 'coupon_code must be 1 to 64 letters, digits, "_" or "-", starting with a letter or digit',
        code: 'invalid_format',
      },
    ]);
    const admin = await atrium.caller({ role: 'admin' });
    const blank = await call(base, 'PATCH', `/v1/users/${who.userId}`, {
      headers: admin.headers,
      json: { name: '\u200b ' },
    });
    expect(blank.status).toBe(400);
    expect(blank.body!.details).toEqual([
      { field: 'name', message: 'name must not be blank', code: 'range_error' },
    ]);
  });

  it('a v1 path no route serves is deprecated but names no successor', async () => {
    const who = await atrium.caller();
    const res = await call(base, 'GET', '/api/v1/nope', { headers: who.headers });
    expect(res.status).toBe(404);
    expect(res.headers.get('deprecation')).toBe('true');
    expect(res.headers.get('sunset')).not.toBeNull();
    expect(res.headers.get('link')).toBeNull();
  });
});
