import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';

/**
 * Cross-origin reads as a browser enforces them: a script on a page of another origin calls
 * Atrium with fetch. Only the origins of CORS_ORIGINS may read the answers, on every surface a page
 * can call; until 2026-11-28 /graphql let any origin read its answers (Yoga echoed every Origin with
 * credentials allowed), which only a browser turns into a leak.
 */

/** A page server on its own port of 127.0.0.1: an origin of its own. */
async function pageOrigin(): Promise<{ origin: string; server: Server }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>app</title><p>app</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface Read {
  ok: boolean;
  status?: number;
  body?: string;
  /** The Deprecation header, as far as the page may read it (CORS exposes it). */
  deprecation?: string | null;
  /** X-Request-Id, which CORS exposes. */
  requestId?: string | null;
  error?: string;
}

describeBrowser('cross-origin reads in a real browser', () => {
  let atrium: TestAtrium;
  let base: string;
  let key: string;
  let chromium: LaunchedBrowser;
  let listed: { origin: string; server: Server };
  let unlisted: { origin: string; server: Server };

  beforeAll(async () => {
    listed = await pageOrigin();
    unlisted = await pageOrigin();
    atrium = await startTestAtrium({ CORS_ORIGINS: listed.origin, LOG_LEVEL: 'silent' });
    base = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller({ role: 'member' })).headers['x-api-key']!;
    chromium = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await atrium?.stop();
    for (const page of [listed, unlisted]) page?.server.close();
  });

  /** Runs the calls from a page of `origin`: what its script could read of each answer. */
  async function readsFrom(origin: string): Promise<Record<string, Read>> {
    const context = await chromium.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${origin}/`);
      return await page.evaluate(
        async ({ base, key }) => {
          const read = async (url: string, init?: RequestInit) => {
            try {
              const res = await fetch(url, init);
              return {
                ok: true,
                status: res.status,
                body: await res.text(),
                deprecation: res.headers.get('deprecation'),
                requestId: res.headers.get('x-request-id'),
              };
            } catch (err) {
              return { ok: false, error: String(err) };
            }
          };
          const query = JSON.stringify({ query: '{ __typename }' });
          return {
            // A simple request: no preflight, the browser decides on the answer's headers alone.
            graphqlGet: await read(`${base}/graphql?query=%7B__typename%7D`),
            graphqlPostText: await read(`${base}/graphql`, {
              method: 'POST',
              headers: { 'content-type': 'text/plain' },
              body: query,
            }),
            // Preflighted: JSON and a credential header.
            graphqlPost: await read(`${base}/graphql`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-api-key': key },
              body: JSON.stringify({ query: '{ me { id } }' }),
            }),
            // What Apollo Client (given a name and version) and a tracing SDK add on their own.
            graphqlApollo: await read(`${base}/graphql`, {
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                'x-api-key': key,
                'apollographql-client-name': 'web',
                'apollographql-client-version': '1.2.3',
                traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
                tracestate: 'vendor=1',
              },
              body: JSON.stringify({ query: '{ me { id } }' }),
            }),
            rest: await read(`${base}/api/v2/orders`, { headers: { 'x-api-key': key } }),
            // Every request header the service reads passes the preflight: conditional reads and
            // a request id of the page's own, which comes back in X-Request-Id.
            conditional: await read(`${base}/api/v2/orders`, {
              headers: {
                'x-api-key': key,
                'if-none-match': '"not-this-one"',
                'if-modified-since': 'Wed, 21 Oct 2015 07:28:00 GMT',
                'x-request-id': 'page-request-1',
              },
            }),
            openapi: await read(`${base}/openapi.json`),
            // A URL the router refuses (bad percent-encoding): no hook runs for it. A simple
            // request: with a credential header the browser's preflight meets the same refusal.
            malformedV1: await read(`${base}/api/v1/orders/%ZZ`),
          };
        },
        { base, key },
      );
    } finally {
      await context.close();
    }
  }

  it('a listed origin reads GraphQL and REST answers', async () => {
    const reads = await readsFrom(listed.origin);
    expect(reads.graphqlGet).toMatchObject({
      ok: true,
      status: 200,
      body: '{"data":{"__typename":"Query"}}',
    });
    expect(reads.graphqlPostText).toMatchObject({ ok: true, status: 415 });
    expect(reads.graphqlPost).toMatchObject({ ok: true, status: 200 });
    expect(JSON.parse(reads.graphqlPost!.body!)).toMatchObject({ data: { me: { id: expect.any(String) } } });
    expect(reads.graphqlApollo).toMatchObject({ ok: true, status: 200 });
    expect(reads.rest).toMatchObject({ ok: true, status: 200 });
    expect(reads.conditional).toMatchObject({ ok: true, status: 200, requestId: 'page-request-1' });
    expect(reads.openapi).toMatchObject({ ok: true, status: 200 });
    expect(reads.malformedV1).toMatchObject({ ok: true, status: 400, deprecation: 'true' });
  });

  it('an unlisted origin reads nothing: every answer is hidden from its script', async () => {
    const reads = await readsFrom(unlisted.origin);
    for (const [name, read] of Object.entries(reads)) {
      expect({ name, ok: read.ok, error: read.error }).toEqual({
        name,
        ok: false,
        error: 'TypeError: Failed to fetch',
      });
    }
  });
});
