import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

/**
 * docs/rest.md: the document cannot differ from what routes check. Fastify's parser answers a
 * body it does not read (text/plain) with 415, and one over BODY_LIMIT_BYTES with 413, on every
 * method that carries a body, whether or not the route declares one; each such operation must
 * document both. Real requests over a socket, against the running server's own /openapi.json.
 */
let atrium: TestAtrium;
let base: string;
let auth: Record<string, string>;

beforeAll(async () => {
  atrium = await startTestAtrium({ BODY_LIMIT_BYTES: '1024' });
  base = (await atrium.listen()).httpUrl!;
  // An admin's key: credentials are checked before the body, so without them most routes say 401.
  auth = (await atrium.caller({ role: 'admin' })).headers;
});

afterAll(async () => {
  await atrium?.stop();
});

type Operation = { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> };

async function operations(): Promise<Array<{ method: string; path: string; op: Operation }>> {
  const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, Operation>>;
  };
  const out: Array<{ method: string; path: string; op: Operation }> = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      // fetch sends no body with GET or HEAD, and Fastify reads none for them.
      if (!['put', 'post', 'delete', 'options', 'patch'].includes(method)) continue;
      out.push({ method: method.toUpperCase(), path, op });
    }
  }
  return out;
}

// Any value fills a path parameter: the parser answers before the route looks at it.
const concrete = (path: string) => path.replace(/\{[^}]+\}/g, 'x1');

describe('every operation documents the body refusals it really gives', () => {
  it('415 for a text/plain body and 413 for a body over the limit', async () => {
    const missing: string[] = [];
    let refused = 0;
    for (const { method, path, op } of await operations()) {
      for (const [status, body] of [
        ['415', 'x'],
        ['413', JSON.stringify({ pad: 'y'.repeat(4096) })],
      ] as const) {
        const res = await fetch(`${base}${concrete(path)}`, {
          method,
          headers: { ...auth, 'content-type': status === '415' ? 'text/plain' : 'application/json' },
          body,
        });
        await res.arrayBuffer();
        if (String(res.status) !== status) continue;
        refused += 1;
        // The REST routes answer with ErrorBody; the sign-in form (POST /authorize) with its error page.
        const content = op.responses?.[status]?.content ?? {};
        if (!Object.values(content).some((media) => media.schema !== undefined))
          missing.push(`${method} ${path} answers ${status}, not documented with a body`);
      }
    }
    expect(refused).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });
});
