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
