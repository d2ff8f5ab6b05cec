import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

/** Fixed, so a failure replays exactly; change it to explore further. */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_123);
/** Bounded twice: at most this many requests, and no longer than this. */
const MAX_RUNS = Number(process.env.FUZZ_RUNS ?? 400);
const TIME_LIMIT_MS = Number(process.env.FUZZ_TIME_MS ?? 6_000);

interface Operation {
  method: string;
  path: string;
  query: string[];
  body: boolean;
}

/** What no answer may contain: a stack frame, a file path, engine or driver text. */
const LEAK =
  /\bat [^\s]+ \(|\.ts:\d+|node_modules|\/src\/|SQLITE|sqlite3?|postgres|pg_|relation "|syntax error at|violates|Kysely|FST_[A-Z_]+|HPE_|TypeError|ReferenceError/i;

/**
 * The text LEAK is looked for in: a body with its random base64url values (a JWKS modulus and key
 * id, a token) left out, as 20 or more such characters mixing lower case, upper case and digits. By
 * chance they spell a marker now and then (a key id holding `Pg_` failed a CI run on 2026-11-29);
 * driver codes (`SQLITE_CONSTRAINT`, `FST_ERR_...`, `pg_advisory_lock`) and paths never look like that.
 */
const leakScanned = (text: string): string =>
  text.replace(/[A-Za-z0-9_-]{20,}/g, (run) =>
    /[a-z]/.test(run) && /[A-Z]/.test(run) && /\d/.test(run) ? '…' : run,
  );

/** Values that have broken parsers somewhere: ids and strings of every hostile kind. */
const hostileText = fc.oneof(
  fc.constantFrom(
    '',
    'usr_01abcdefghjkmnpqrstvwxyz01',
    'ord_01abcdefghjkmnpqrstvwxyz01',
    '%ZZ',
    '%00',
    '..%2F..%2Fpackage.json',
    '__proto__',
    'constructor',
    "' OR 1=1 --",
    '${jndi:ldap://x}',
    '<script>alert(1)</script>',
    '\u202e\u0000',
    'x'.repeat(300),
    '-1',
    '1e309',
    'NaN',
    'null',
    '[]',
    '{}',
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.integer().map(String),
);

const jsonBody = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc
    .dictionary(
      fc.constantFrom(
        'items',
        'currency',
        'shipping_address',
        'coupon_code',
        'name',
        'email',
        'role',
        'status',
        '__proto__',
        'x',
      ),
      fc.jsonValue({ maxDepth: 2 }),
    )
    .map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 60 }),
  fc.constantFrom(
    '{',
    '{"a":',
    '[1,2',
    '\u0000',
    '{"__proto__":{"admin":true}}',
    '{"constructor":{"prototype":{"x":1}}}',
  ),
);

/**
 * A bounded property-based fuzz pass over every operation in /openapi.json, on a real socket:
 * hostile path and query values, forged and missing credentials, wrong content types and broken
 * bodies. Whatever is sent: no 5xx, nothing leaked, errors in the spec's shape, and the server
 * still answers afterwards.
 */
describe('fuzzing every route of the OpenAPI document', () => {
  let atrium: TestAtrium;
  let base: string;
  let key: string;
  let operations: Operation[];

  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
    key = (await atrium.caller({ role: 'admin' })).key;
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
      paths: Record<
        string,
        Record<string, { parameters?: { in: string; name: string }[]; requestBody?: unknown }>
      >;
    };
    operations = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        operations.push({
          method: method.toUpperCase(),
          path,
          query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
          body: op.requestBody !== undefined,
        });
      }
    }
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('reads the whole document', () => {
    expect(operations.length).toBeGreaterThanOrEqual(35);
  });

  it('answers every generated request without a 5xx, a leak or a body outside the spec shape', async () => {
    const request = fc.record({
      op: fc.nat().map((n) => operations[n % operations.length]!),
      pathValues: fc.array(hostileText, { minLength: 3, maxLength: 3 }),
      encode: fc.boolean(),
      query: fc.array(
        fc.tuple(
          fc.oneof(fc.constantFrom('limit', 'cursor', 'status', 'sort'), fc.string({ maxLength: 8 })),
          hostileText,
        ),
        {
          maxLength: 4,
        },
      ),
      credential: fc.constantFrom('valid', 'none', 'forged-key', 'forged-jwt', 'garbage-bearer', 'basic'),
      contentType: fc.constantFrom(
        'application/json',
        'application/x-www-form-urlencoded',
        'text/plain',
        'application/xml',
        'multipart/form-data; boundary=x',
        undefined,
      ),
      body: jsonBody,
    });

    let runs = 0;
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        runs += 1;
        let i = 0;
        const path = r.op.path.replace(/\{\w+\}/g, () => {
          const v = r.pathValues[i++ % 3]!;
          return r.encode ? encodeURIComponent(v) : v.replace(/[?#/\s]/g, encodeURIComponent);
        });
        const search = new URLSearchParams(r.query).toString();
        const url = `${base}${path}${search ? `?${search}` : ''}`;
        const headers: Record<string, string> = {};
        if (r.credential === 'valid') headers['x-api-key'] = key;
        if (r.credential === 'forged-key') headers['x-api-key'] = `atr_live_${'0'.repeat(32)}_000000`;
        if (r.credential === 'forged-jwt')
          headers.authorization = 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.';
        if (r.credential === 'garbage-bearer') headers.authorization = 'Bearer \u00ff';
        if (r.credential === 'basic')
          headers.authorization = `Basic ${Buffer.from('cli_x:secret').toString('base64')}`;
        const withBody = r.op.method !== 'GET' && r.op.method !== 'DELETE';
        if (withBody && r.contentType) headers['content-type'] = r.contentType;
        let res: Response;
        try {
          res = await fetch(url, {
            method: r.op.method,
            headers,
            body: withBody ? r.body : undefined,
            redirect: 'manual',
          });
        } catch (err) {
          // The client refused to send it (an invalid header value): nothing reached the server.
          if (err instanceof TypeError && /header|ByteString|Invalid/i.test(String(err.message))) return;
          throw err;
        }
        const text = await res.text();
        const where = `${r.op.method} ${url} [${r.credential}, ${r.contentType}] -> ${res.status} ${text.slice(0, 200)}`;
        expect(res.status, where).toBeLessThan(500);
        expect(leakScanned(text), where).not.toMatch(LEAK);
        const type = res.headers.get('content-type') ?? '';
        if (res.status >= 400 && type.startsWith('application/json')) {
          const body = JSON.parse(text) as Record<string, unknown>;
          expect(typeof body.error, where).toBe('string');
          const tokenServer = r.op.path.startsWith('/oauth/');
          if (!tokenServer) {
            expect(typeof body.message, where).toBe('string');
            expect(body.request_id, where).toBe(res.headers.get('x-request-id'));
            expect(Array.isArray(body.details), where).toBe(true);
            expect((body.details as unknown[]).length, where).toBeLessThanOrEqual(21);
          }
        } else if (res.status >= 400) {
          // Only the authorization endpoint answers with pages.
          expect(r.op.path, where).toBe('/authorize');
          expect(type, where).toMatch(/^text\/html/);
        }
        if (res.status >= 400) expect(res.headers.get('x-content-type-options'), where).toBe('nosniff');
      }),
      {
        seed: SEED,
        numRuns: MAX_RUNS,
        interruptAfterTimeLimit: TIME_LIMIT_MS,
        markInterruptAsFailure: false,
        endOnFailure: true,
      },
    );
    // The bound really let it run a meaningful number of requests.
    expect(runs).toBeGreaterThanOrEqual(50);
    if (process.env.FUZZ_SEED) process.stderr.write(`fuzz: ${runs} requests\n`);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const listed = await fetch(`${base}/api/v2/orders?limit=1`, { headers: { 'x-api-key': key } });
    expect(listed.status).toBe(200);
  }, 60_000);
});
