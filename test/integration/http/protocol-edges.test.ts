import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { orderCount as countOrders } from '../orders/fixtures.js';
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
  const orderCount = () => countOrders(atrium);

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

  describe('a request body with a Content-Encoding other than identity', () => {
    /** Raw bytes: fetch would not send a body labelled with a coding it did not apply. */
    const post = (path: string, type: string, encoding: string, body: Buffer, extra = '') =>
      rawRequest(
        base,
        Buffer.concat([
          Buffer.from(
            `POST ${path} HTTP/1.1\r\n${host()}X-API-Key: ${key}\r\n${extra}Content-Type: ${type}\r\n` +
              `Content-Encoding: ${encoding}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
          ),
          body,
        ]),
      );

    it('is 415 unsupported_media_type naming Content-Encoding on REST, and nothing is created', async () => {
      const before = await orderCount();
      for (const [encoding, body] of [
        ['gzip', gzipSync(orderJson())],
        ['br', Buffer.from(orderJson())],
        ['identity, gzip', gzipSync(orderJson())],
      ] as const) {
        const res = await post('/api/v2/orders', 'application/json', encoding, body);
        const error = expectSpecError(res, 415, 'unsupported_media_type');
        expect(error.message).toMatch(/Content-Encoding/);
        expect(res.headers['accept-encoding']).toBe('identity');
      }
      expect(await orderCount()).toBe(before);
      // identity is no coding at all.
      const plain = await post('/api/v2/orders', 'application/json', 'identity', Buffer.from(orderJson()));
      expect(plain.status).toBe(201);
      expect(await orderCount()).toBe(before + 1);
    });

    it('is 415 naming Content-Encoding on the token server and on /graphql, in their shapes', async () => {
      const token = await post(
        '/oauth/token',
        'application/x-www-form-urlencoded',
        'gzip',
        gzipSync('grant_type=client_credentials&client_id=x&client_secret=y'),
      );
      expect(token.status, token.body).toBe(415);
      expect(JSON.parse(token.body)).toMatchObject({
        error: 'invalid_request',
        error_description: expect.stringMatching(/Content-Encoding/),
      });
      const mutation = JSON.stringify({
        query: `mutation { createOrder(input: { currency: "USD", items: [{ productId: "${product}", quantity: 1 }] }) { id } }`,
      });
      const before = await orderCount();
      const graphql = await post('/graphql', 'application/json', 'gzip', gzipSync(mutation));
      expect(graphql.status).toBe(415);
      expect(JSON.parse(graphql.body)).toEqual({
        errors: [
          { message: expect.stringMatching(/Content-Encoding/), extensions: { code: expect.any(String) } },
        ],
      });
      const plain = await post('/graphql', 'application/json', 'br', Buffer.from('{"query":"{__typename}"}'));
      expect(plain.status).toBe(415);
      expect(await orderCount()).toBe(before);
    });

    it('does not concern a request without a body', async () => {
      const res = await rawRequest(
        base,
        `GET /api/v2/orders?limit=1 HTTP/1.1\r\n${host()}X-API-Key: ${key}\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n`,
      );
      expect(res.status).toBe(200);
    });
  });

  describe('the Host header of an HTTP/1.1 request (RFC 9112 §3.2)', () => {
    it('is 400 in the spec shape with Connection: close when missing or repeated', async () => {
      for (const bytes of [
        'GET /healthz HTTP/1.1\r\n\r\n',
        `GET /healthz HTTP/1.1\r\n${host()}Host: evil.example\r\n\r\n`,
        `GET /api/v2/orders HTTP/1.1\r\nX-API-Key: ${key}\r\n\r\n`,
      ]) {
        const res = await rawRequest(base, bytes);
        const body = expectSpecError(res, 400, 'validation_error');
        expect(JSON.stringify(body.details)).toMatch(/Host/);
        expect(res.headers.connection).toBe('close');
        expect(res.closed).toBe(true);
      }
    });

    it('is not required of HTTP/1.0, and one Host is fine', async () => {
      expect((await rawRequest(base, 'GET /healthz HTTP/1.0\r\n\r\n')).status).toBe(200);
      const one = await rawRequest(base, `GET /healthz HTTP/1.1\r\n${host()}Connection: close\r\n\r\n`);
      expect(one.status).toBe(200);
    });
  });
});

describe('a request body slower than REQUEST_TIMEOUT_MS', () => {
  let atrium: TestAtrium;
  let base: string;
  let key: string;

  beforeAll(async () => {
    atrium = await startTestAtrium({ REQUEST_TIMEOUT_MS: '600' });
    base = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller()).key;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  const head = (length: number) =>
    `POST /api/v2/orders HTTP/1.1\r\nHost: ${new URL(base).host}\r\nX-API-Key: ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  it('is 408 request_timeout with Connection: close when the body stalls', async () => {
    const res = await rawRequest(base, `${head(100)}{"cur`, 5_000);
    expectSpecError(res, 408, 'request_timeout');
    expect(res.headers.connection).toBe('close');
    expect(res.closed).toBe(true);
  });

  it('is 408 when the body trickles in a byte at a time past the deadline', async () => {
    const { hostname, port } = new URL(base);
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(head(200));
    const trickle = setInterval(() => socket.writable && socket.write(' '), 50);
    const cutoff = setTimeout(() => socket.destroy(), 5_000);
    await closed;
    clearInterval(trickle);
    clearTimeout(cutoff);
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: 'request_timeout' });
  });
});

describe('Allow on /graphql/stream', () => {
  it('lists the methods that really work, the same on every answer', async () => {
    const atrium = await startTestAtrium();
    try {
      const base = (await atrium.listen()).httpUrl!;
      const allows: string[] = [];
      for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
        const res = await fetch(`${base}/graphql/stream`, { method });
        expect(res.status, method).toBe(method === 'OPTIONS' ? 204 : 405);
        allows.push(res.headers.get('allow') ?? '');
      }
      expect(allows).toEqual(['GET, POST', 'GET, POST', 'GET, POST', 'GET, POST, OPTIONS']);
    } finally {
      await atrium.stop();
    }
  });
});
