import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { rawRequest, type RawResponse } from '../../helpers/raw-http.js';

const run = promisify(execFile);

/** The spec's error body, with its request id echoed in the header. */
function expectSpecError(res: RawResponse, status: number, error: string): Record<string, unknown> {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'request_id']);
  expect(body.error).toBe(error);
  expect(res.headers['x-request-id']).toBe(body.request_id);
  return body;
}

/** Real curl: `--http2` on an http:// URL sends `Upgrade: h2c` with `Connection: Upgrade, HTTP2-Settings`. */
async function curl(args: string[]): Promise<{ status: number; body: string }> {
  const { stdout } = await run('curl', ['-s', '-w', '\n%{http_code}', ...args], { timeout: 10_000 });
  const at = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(at + 1)), body: stdout.slice(0, at) };
}

describe('HTTP protocol edges over real sockets', () => {
  let atrium: TestAtrium;
  let base: string;
  let key: string;
  let product: string;
  /** A valid order: what a client would create. */
  const orderJson = () =>
    JSON.stringify({
      currency: 'USD',
      items: [{ product_id: product, quantity: 1 }],
      shipping_address: { name: 'Ada', street: '1 Road', city: 'London', postal_code: 'N1', country: 'GB' },
    });
  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller()).key;
    product = (await atrium.services.core.products.create({ name: 'Widget', priceCents: 1250 })).id;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  const host = () => `Host: ${new URL(base).host}\r\n`;

  describe('an Upgrade other than a websocket to /graphql is ignored (RFC 9110 §7.8)', () => {
    it('answers curl --http2 (Upgrade: h2c) over HTTP/1.1 on REST, health and /graphql, GET and POST', async () => {
      const list = await curl(['--http2', '-H', `X-API-Key: ${key}`, `${base}/api/v2/orders?limit=1`]);
      expect(list.status).toBe(200);
      expect(JSON.parse(list.body)).toMatchObject({ data: [] });
      expect((await curl(['--http2', `${base}/healthz`])).status).toBe(200);
      const get = await curl([
        '--http2',
        '-H',
        `X-API-Key: ${key}`,
        `${base}/graphql?query=%7B__typename%7D`,
      ]);
      expect(get.status).toBe(200);
      expect(JSON.parse(get.body)).toEqual({ data: { __typename: 'Query' } });
      const post = await curl([
        '--http2',
        '-H',
        `X-API-Key: ${key}`,
        '-H',
        'Content-Type: application/json',
        '-d',
        '{"query":"{__typename}"}',
        `${base}/graphql`,
      ]);
      expect(post.status).toBe(200);
      expect(JSON.parse(post.body)).toEqual({ data: { __typename: 'Query' } });
      const order = await curl([
        '--http2',
        '-H',
        `X-API-Key: ${key}`,
        '-H',
        'Content-Type: application/json',
        '-d',
        orderJson(),
        `${base}/api/v2/orders`,
      ]);
      expect(order.status).toBe(201);
      expect(JSON.parse(order.body)).toMatchObject({ currency: 'USD', status: expect.any(String) });
    });

    it('answers Upgrade: foo, a body included, and closes the connection after the answer', async () => {
      const body = '{"query":"{__typename}"}';
      const res = await rawRequest(
        base,
        `POST /graphql HTTP/1.1\r\n${host()}X-API-Key: ${key}\r\nUpgrade: foo\r\nConnection: Upgrade\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ data: { __typename: 'Query' } });
      expect(res.headers.connection).toBe('close');
      expect(res.closed).toBe(true);
      const health = await rawRequest(
        base,
        `GET /healthz HTTP/1.1\r\n${host()}Upgrade: foo\r\nConnection: Upgrade\r\n\r\n`,
      );
      expect(health.status).toBe(200);
    });

    it('answers a websocket upgrade on a path without WebSockets over HTTP', async () => {
      const res = await rawRequest(
        base,
        `GET /healthz HTTP/1.1\r\n${host()}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ status: 'ok' });
    });

    it('refuses a malformed websocket handshake on /graphql with 400 in the spec shape', async () => {
      const badKey = await rawRequest(
        base,
        `GET /graphql HTTP/1.1\r\n${host()}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: bad\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      expectSpecError(badKey, 400, 'validation_error');
      expect(badKey.body).toContain('Sec-WebSocket-Key');
      expect(badKey.closed).toBe(true);
      const badVersion = await rawRequest(
        base,
        `GET /graphql HTTP/1.1\r\n${host()}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 99\r\n\r\n',
      );
      expectSpecError(badVersion, 400, 'validation_error');
      expect(badVersion.headers['sec-websocket-version']).toBe('13, 8');
    });

    it('still switches a well-formed websocket handshake on /graphql', async () => {
      const { WebSocket } = await import('ws');
      const ws = new WebSocket(`${base.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
      const opened = await new Promise<boolean>((resolve) => {
        ws.once('open', () => resolve(true));
        ws.once('error', () => resolve(false));
      });
      expect(opened).toBe(true);
      ws.terminate();
    });
  });
});
