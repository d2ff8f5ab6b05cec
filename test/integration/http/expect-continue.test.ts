import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';

/**
 * `Expect: 100-continue`, which curl sends for any body over 1 KiB: the server says 100 only when a
 * route starts reading the body. A request refused before that (no credentials, a declared length
 * over the limit, a type no route reads) gets its answer instead of an invitation to upload, and the
 * client never sends the body. Until 2026-11-29 Node said 100 at once, and a client with a bad key
 * uploaded a whole 1 MiB body to be told 401.
 */
let atrium: TestAtrium;
let base: URL;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium();
  base = new URL((await atrium.listen()).httpUrl!);
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
});

/** A socket that sends the head, then the body only once the server answers 100. */
async function expectingContinue(
  head: string,
  body: string,
): Promise<{ first: string; all: string; bodySent: boolean }> {
  const socket: Socket = connect({ host: base.hostname, port: Number(base.port) });
  let all = '';
  let bodySent = false;
  let first: string | undefined;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => socket.destroy(), 5_000);
    socket.on('data', (chunk: Buffer) => {
      all += chunk.toString('latin1');
      first ??= all.split('\r\n')[0];
      if (!bodySent && all.startsWith('HTTP/1.1 100 ') && all.includes('\r\n\r\n')) {
        bodySent = true;
        socket.write(body);
      }
      // A final answer after the 100 (or instead of it) is complete once its body has arrived.
      const final = all.replace(/^HTTP\/1\.1 100 [^\r]*\r\n\r\n/, '');
      const split = final.indexOf('\r\n\r\n');
      if (split >= 0) {
        const length = /\r\ncontent-length: (\d+)/i.exec(final.slice(0, split));
        if (length && final.length - split - 4 >= Number(length[1])) socket.end();
      }
    });
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ first: first ?? '', all, bodySent });
    });
    socket.write(head);
  });
}

function head(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries({ Host: base.host, ...headers }).map(([k, v]) => `${k}: ${v}`);
  return `${method} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\nExpect: 100-continue\r\n\r\n`;
}

describe('Expect: 100-continue', () => {
  it('a request that will be served is told 100, then sends its body and is answered (REST, GraphQL, token server)', async () => {
    const who = await atrium.caller();
    const order = JSON.stringify(orderBody(catalogue));
    const created = await expectingContinue(
      head('POST', '/api/v2/orders', {
        'X-API-Key': who.key,
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(order),
      }),
      order,
    );
    expect(created.first).toBe('HTTP/1.1 100 Continue');
    expect(created.bodySent).toBe(true);
    expect(created.all).toMatch(/\r\n\r\nHTTP\/1\.1 201 Created\r\n/);

    const query = JSON.stringify({ query: '{ me { id } }' });
    const graphql = await expectingContinue(
      head('POST', '/graphql', {
        'X-API-Key': who.key,
        'Content-Type': 'application/json',
        Accept: 'application/graphql-response+json',
        'Content-Length': Buffer.byteLength(query),
      }),
      query,
    );
    expect(graphql.first).toBe('HTTP/1.1 100 Continue');
    expect(graphql.all).toContain(`{"data":{"me":{"id":"${who.userId}"}}}`);

    const form = 'grant_type=client_credentials';
    const token = await expectingContinue(
      head('POST', '/oauth/token', {
        Authorization: `Basic ${Buffer.from('cli_nobody:wrong').toString('base64')}`,
        'Content-Type': 'application/x-www-form-urlencoded',
        'Content-Length': form.length,
      }),
      form,
    );
    expect(token.first).toBe('HTTP/1.1 100 Continue');
    expect(token.all).toMatch(/\r\n\r\nHTTP\/1\.1 401 Unauthorized\r\n/);
    expect(token.all).toContain('"error":"invalid_client"');
  });

  it('a request without credentials is answered 401 at once, never invited to send its body', async () => {
    const big = 'x'.repeat(64 * 1024);
    const res = await expectingContinue(
      head('POST', '/api/v2/orders', { 'Content-Type': 'application/json', 'Content-Length': big.length }),
      big,
    );
    expect(res.first).toBe('HTTP/1.1 401 Unauthorized');
    expect(res.bodySent).toBe(false);
    expect(res.all).not.toContain('100 Continue');
    expect(res.all).toContain('"error":"invalid_token"');
    expect(res.all).toMatch(/\r\nConnection: close\r\n/);
  });

  it('a declared length over BODY_LIMIT_BYTES is 413 at once; a type no route reads is 415 at once', async () => {
    const who = await atrium.caller();
    const limit = atrium.services.config.bodyLimitBytes;
    const tooBig = await expectingContinue(
      head('POST', '/api/v2/orders', {
        'X-API-Key': who.key,
        'Content-Type': 'application/json',
        'Content-Length': limit + 1,
      }),
      'x'.repeat(limit + 1),
    );
    expect(tooBig.first).toBe('HTTP/1.1 413 Payload Too Large');
    expect(tooBig.bodySent).toBe(false);
    expect(tooBig.all).toContain('"error":"payload_too_large"');

    const text = await expectingContinue(
      head('POST', '/api/v2/orders', {
        'X-API-Key': who.key,
        'Content-Type': 'text/plain',
        'Content-Length': 5,
      }),
      'hello',
    );
    expect(text.first).toBe('HTTP/1.1 415 Unsupported Media Type');
    expect(text.bodySent).toBe(false);
  });
});
