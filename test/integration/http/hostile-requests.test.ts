import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { rawRequest, type RawResponse } from '../../helpers/raw-http.js';

const SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'strict-origin-when-cross-origin',
};

/** The spec's error body, with its request id echoed in the header. */
function expectSpecError(res: RawResponse, status: number, error: string): void {
  expect(res.status).toBe(status);
  expect(res.headers).toMatchObject(SECURITY);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'request_id']);
  expect(body.error).toBe(error);
  expect(body.request_id).toMatch(/^req_[0-9a-f]{24}$/);
  expect(res.headers['x-request-id']).toBe(body.request_id);
  expect(res.body).not.toMatch(/stack|\bat .+:\d+|HPE_|FST_|node:/);
}

/**
 * Hostile requests over a real socket, sent byte for byte: what Node's parser refuses before any
 * route, what libraries refuse with a 4xx of their own, and what runs before a handler.
 */
describe('hostile requests get the spec answer', () => {
  let atrium: TestAtrium;
  let base: string;

  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  const host = () => `Host: ${new URL(base).host}\r\n`;

  describe('requests Node refuses before routing: spec shape, security headers, Connection: close', () => {
    const cases: [string, () => string, number, string][] = [
      ['an unknown method', () => `FOO /healthz HTTP/1.1\r\n${host()}\r\n`, 400, 'validation_error'],
      ['a garbled request line', () => `GET /healthz HTTP/9\r\n${host()}\r\n`, 400, 'validation_error'],
      [
        'a NUL in a header',
        () => `GET /healthz HTTP/1.1\r\n${host()}X-Evil: a\u0000b\r\n\r\n`,
        400,
        'validation_error',
      ],
      [
        'both Content-Length and Transfer-Encoding',
        () =>
          `POST /api/v2/orders HTTP/1.1\r\n${host()}Content-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
        400,
        'validation_error',
      ],
      [
        'more than 16 KB of headers',
        () => `GET /healthz HTTP/1.1\r\n${host()}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        'request_header_fields_too_large',
      ],
      [
        'an Expect other than 100-continue',
        () => `GET /healthz HTTP/1.1\r\n${host()}Expect: teapot\r\n\r\n`,
        417,
        'expectation_failed',
      ],
    ];
    for (const [name, bytes, status, error] of cases) {
      it(`answers ${name} with ${status}`, async () => {
        const res = await rawRequest(base, bytes());
        expectSpecError(res, status, error);
        expect(res.headers.connection).toBe('close');
        expect(res.closed).toBe(true);
        expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.body));
      });
    }

    it('sends no body to a HEAD request, only the headers', async () => {
      for (const bytes of [
        `HEAD /healthz HTTP/1.1\r\n${host()}X-Evil: a\u0000b\r\n\r\n`,
        `HEAD /healthz HTTP/1.1\r\n${host()}Expect: teapot\r\n\r\n`,
      ]) {
        const res = await rawRequest(base, bytes);
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.headers).toMatchObject({ ...SECURITY, connection: 'close' });
        expect(res.headers['x-request-id']).toMatch(/^req_/);
        expect(res.body).toBe('');
        expect(res.closed).toBe(true);
      }
    });

    it('keeps serving afterwards', async () => {
      const res = await fetch(`${base}/healthz`);
      expect(res.status).toBe(200);
    });
  });

  it('keeps the 403 of the static file server for a path that climbs out of its root', async () => {
    const res = await rawRequest(
      base,
      `GET /docs/static/../../../package.json HTTP/1.1\r\n${host()}Connection: close\r\n\r\n`,
    );
    expectSpecError(res, 403, 'forbidden');
    expect(res.body).not.toContain('"name"');
  });

  it('answers errors raised before a user-API handler in the user API case', async () => {
    const { headers } = await atrium.caller();
    for (const path of ['/v1/users/%ZZ', '/v1/organizations/%E0%A4%A', '/v1/users/usr_x/nothing-here']) {
      const res = await fetch(`${base}${path}`, { headers });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      const body = (await res.json()) as { error: string };
      expect(body.error, path).toMatch(/^[A-Z_]+$/);
    }
    const bad = await fetch(`${base}/v1/users/%ZZ`, { headers });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('VALIDATION_ERROR');
    const missing = await fetch(`${base}/v1/users/usr_x/nothing-here`, { headers });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: string }).error).toBe('NOT_FOUND');
    // Other APIs keep their own case for the same mistake.
    const orders = await fetch(`${base}/api/v2/orders/%ZZ`, { headers });
    expect(((await orders.json()) as { error: string }).error).toBe('validation_error');
  });

  it('lists at most 20 validation problems and counts the rest', async () => {
    const { headers } = await atrium.caller();
    const body: Record<string, number> = {};
    for (let i = 0; i < 20_000; i += 1) body[`unknown_key_${i}`] = i;
    const created = await fetch(`${base}/api/v2/orders`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(created.status).toBe(400);
    const text = await created.text();
    expect(text.length).toBeLessThan(8_000);
    const { details } = JSON.parse(text) as {
      details: { field: string | null; code: string; message: string }[];
    };
    expect(details).toHaveLength(21);
    const last = details[20]!;
    expect(last.code).toBe('more_problems');
    expect(last.field).toBeNull();
    const listed = details.slice(0, 20);
    expect(listed.every((d) => d.code !== 'more_problems')).toBe(true);
    // 20,000 unknown keys and the three required fields: 20,003 problems, 20 listed.
    expect(last.message).toBe('19983 more problems not listed; fix these first.');
  });

  it('refuses text/plain where JSON or a form is expected', async () => {
    const { headers } = await atrium.caller();
    const json = await fetch(`${base}/api/v2/orders`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body: '{"items":[]}',
    });
    expect(json.status).toBe(415);
    expect(((await json.json()) as { error: string }).error).toBe('unsupported_media_type');
    for (const path of ['/oauth/token', '/oauth/introspect']) {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'text/plain',
          authorization: `Basic ${Buffer.from('a:b').toString('base64')}`,
        },
        body: 'grant_type=client_credentials&token=x',
      });
      expect(res.status, path).toBe(400);
      expect(await res.json(), path).toMatchObject({ error: 'invalid_request' });
    }
  });
});
