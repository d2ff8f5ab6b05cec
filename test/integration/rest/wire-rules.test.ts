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
