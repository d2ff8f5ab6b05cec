import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { testDialect } from '../../helpers/database.js';
import {
  behindProxyForSuite,
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
  REQUEST_OUTAGE_LINE,
  REQUEST_BACK_LINE,
  poolEmptied,
  engineOutageError,
  FailingStatements,
} from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import {
  authorizeQuery,
  basic,
  discover,
  form,
  freePort,
  insecure,
  pkce,
  REDIRECT,
  type OAuthTestServer,
  clientCredentialsTokens,
} from './support.js';

const skip = await postgresMissing();

/**
 * docs/deployment.md, "PostgreSQL restarting": 503 with Retry-After, never a 500 and never storage
 * text. The sign-in pages are pages, so they say it as a page.
 */
describe.skipIf(skip !== undefined)('the sign-in pages when the database cannot be reached', () => {
  const env = behindProxyForSuite({}, ['auth']);
  let client: { client_id: string; client_secret: string | null };

  beforeAll(async () => {
    client = await env.atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: [REDIRECT],
      firstParty: true,
    });
    await env.cutDatabase();
  });

  const query = () => form(authorizeQuery(client.client_id, pkce().challenge));

  it('GET /authorize answers a 503 page saying the service is temporarily unavailable, with Retry-After', async () => {
    const res = await fetch(`${env.httpUrl}/authorize?${query()}`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('temporarily unavailable');
    expect(html).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres|terminat|went wrong/i);
  });

  it('POST /authorize (the login form) answers the same 503 page', async () => {
    const res = await fetch(`${env.httpUrl}/authorize?${query()}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ username: 'someone', password: 'secret' }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.text()).toContain('temporarily unavailable');
  });

  it('as /oauth/token answers 503 temporarily_unavailable', async () => {
    const res = await fetch(`${env.httpUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret!),
      },
      body: form({ grant_type: 'client_credentials' }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
  });
});

const OUTAGE = REQUEST_OUTAGE_LINE;
const BACK = REQUEST_BACK_LINE;

type Line = Record<string, unknown>;
/** What the server logged besides its access lines (one `request` line per response, at info). */
const logged = (lines: Line[]) => lines.filter((l) => l.msg !== 'request');
const messages = (lines: Line[]) => logged(lines).map((l) => l.msg);

/**
 * oauth4webapi reads an error body on 4xx only; a 503 is a response it does not conform to, and it
 * hands the response over as the cause.
 */
async function expectRefusedWith503(attempt: Promise<unknown>) {
  const err = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(oauth.OperationProcessingError);
  const response = (err as { cause: Response }).cause;
  expect(response.status).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expectUnavailableBody(await response.text());
}

/** The token server's answer to a failure it cannot blame on the client: the spec's RFC 6749 body. */
function expectUnavailableBody(text: string) {
  expect(JSON.parse(text)).toEqual({
    error: 'temporarily_unavailable',
    error_description: 'The authorization server is temporarily unavailable.',
  });
  expect(text).not.toMatch(/ECONNREFUSED|ECONNRESET|127\.0\.0\.1|postgres|terminat|stack/i);
}

/**
 * docs/deployment.md, "What is logged while PostgreSQL is away": the token server logs a database
 * outage once (a warning with the driver's message and code, no stack) and once when the database
 * answers again, not one error with a stack per token request; its answers stay the spec's 503
 * temporarily_unavailable. An oauth4webapi client, over a socket, against PostgreSQL behind a proxy
 * the test cuts.
 */
describe.skipIf(skip !== undefined)('the token server log while PostgreSQL is unreachable', () => {
  const log = memoryLog('info');
  let behind: ListeningBehindProxy;
  let as: oauth.AuthorizationServer;
  let client: { client_id: string; client_secret: string };
  let apiKey: string;

  beforeAll(async () => {
    const port = await freePort();
    // The api role too: REST's 503 follows the same rule, so an outage is one line for both.
    behind = await startListeningBehindProxy({ PORT: String(port) }, ['api', 'auth'], {
      logger: log.logger,
    });
    as = await discover({ url: behind.httpUrl } as OAuthTestServer);
    const created = await behind.atrium.services.oauth.clients.create({
      name: 'Reporting job',
      scopes: 'profile:read',
    });
    client = { client_id: created.client_id, client_secret: created.client_secret! };
    const user = await behind.atrium.services.core.users.create({
      handle: 'outagetokenlog',
      email: 'outagetokenlog@example.com',
    });
    apiKey = (await behind.atrium.services.apiKeys.create({ userId: user.id, tier: 'enterprise' })).key;
  });
  afterAll(() => behind?.stop());

  const grant = () => clientCredentialsTokens(as, client);

  it('logs the outage once, with its code and no stack, and its end once', async () => {
    expect((await grant()).access_token).toBeTruthy();
    const before = log.lines.length;
    await behind.cutDatabase();
    // The pool drops the connections the proxy cut: the next statement meets a refused connection.
    await poolEmptied(behind.atrium.services.store);

    for (let i = 0; i < 6; i++) {
      await expectRefusedWith503(grant());
    }
    // The raw answer: the spec's error body, Retry-After, never cached, no storage text.
    const raw = await fetch(`${behind.httpUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret),
      },
      body: form({ grant_type: 'client_credentials' }),
    });
    expect(raw.status).toBe(503);
    expect(raw.headers.get('retry-after')).toBe('1');
    expect(raw.headers.get('cache-control')).toBe('no-store');
    expectUnavailableBody(await raw.text());

    const during = logged(log.lines.slice(before));
    expect(during.map((l) => l.msg)).toEqual([OUTAGE]);
    expect(during[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED' });
    expect(during[0]!.err).toMatch(/ECONNREFUSED/);
    expect(JSON.stringify(during)).not.toContain('stack');

    await behind.restoreDatabase();
    expect((await grant()).access_token).toBeTruthy();
    const after = logged(log.lines.slice(before));
    expect(after.map((l) => l.msg)).toEqual([OUTAGE, BACK]);
    expect(after[1]).toMatchObject({ level: 40, failures: 7 });
  }, 30_000);

  it('logs one line for the outage whichever token-server endpoint, sign-in page or REST route meets it', async () => {
    const before = log.lines.length;
    await behind.cutDatabase();
    await poolEmptied(behind.atrium.services.store);
    try {
      await expectRefusedWith503(grant());
      const introspection = await oauth.introspectionRequest(
        as,
        { client_id: client.client_id },
        oauth.ClientSecretBasic(client.client_secret),
        'opaque-token',
        insecure,
      );
      expect(introspection.status).toBe(503);
      expectUnavailableBody(await introspection.text());
      const refresh = await fetch(`${behind.httpUrl}/oauth/token/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: 'r'.repeat(43), client_id: client.client_id }),
      });
      expect(refresh.status).toBe(503);
      expectUnavailableBody(await refresh.text());
      const page = await fetch(
        `${behind.httpUrl}/authorize?${form(authorizeQuery(client.client_id, pkce().challenge))}`,
      );
      expect(page.status).toBe(503);
      expect(await page.text()).toContain('temporarily unavailable');
      const rest = await fetch(`${behind.httpUrl}/api/v2/orders`, { headers: { 'x-api-key': apiKey } });
      expect(rest.status).toBe(503);
      expect(await rest.json()).toMatchObject({ error: 'service_unavailable' });

      expect(messages(log.lines.slice(before))).toEqual([OUTAGE]);
    } finally {
      await behind.restoreDatabase();
    }
    expect((await grant()).access_token).toBeTruthy();
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE, BACK]);
  }, 30_000);
});

/** The same rule on either engine, with the store's failure made by the test. */
describe('the token server log when its statements fail', () => {
  const log = memoryLog('info');
  const fail = new FailingStatements();
  let atrium: TestAtrium;
  let url: string;
  let client: { client_id: string; client_secret: string };

  beforeAll(async () => {
    const port = await freePort();
    atrium = await startTestAtrium({ PORT: String(port), HOST: '127.0.0.1' }, ['auth'], {
      logger: log.logger,
      storePlugins: [fail],
    });
    await atrium.listen();
    url = `http://127.0.0.1:${port}`;
    const created = await atrium.services.oauth.clients.create({ name: 'Job', scopes: 'profile:read' });
    client = { client_id: created.client_id, client_secret: created.client_secret! };
  });
  afterAll(async () => {
    fail.failing = undefined;
    await atrium?.stop();
  });

  const token = () =>
    fetch(`${url}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret),
      },
      body: form({ grant_type: 'client_credentials' }),
    });

  it('logs the database being away once and its return once (SQLite: busy; PostgreSQL: terminated)', async () => {
    const before = log.lines.length;
    fail.failing = engineOutageError();
    for (let i = 0; i < 4; i++) {
      const res = await token();
      expect(res.status).toBe(503);
      expectUnavailableBody(await res.text());
    }
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE]);
    expect(logged(log.lines.slice(before))[0]).toMatchObject({
      level: 40,
      err: fail.failing.message,
      code: (fail.failing as Error & { code: string }).code,
    });
    fail.failing = undefined;
    expect((await token()).status).toBe(200);
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE, BACK]);
    expect(logged(log.lines).at(-1)).toMatchObject({ failures: 4 });
  });

  it('logs a failure that is not about reaching the database in full, every time, even during an outage', async () => {
    const before = log.lines.length;
    const outage =
      testDialect() === 'postgres'
        ? new Error('Connection terminated unexpectedly')
        : Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    const broken = Object.assign(new Error('relation "oauth_clients" does not exist'), { code: '42P01' });
    const statuses: number[] = [];
    try {
      for (const error of [outage, broken, outage, broken, broken, outage]) {
        fail.failing = error;
        const res = await token();
        statuses.push(res.status);
        const text = await res.text();
        if (res.status === 500) {
          expect(JSON.parse(text)).toEqual({
            error: 'server_error',
            error_description: 'The authorization server met an unexpected condition.',
          });
          expect(text).not.toContain('oauth_clients');
        } else expectUnavailableBody(text);
      }
    } finally {
      fail.failing = undefined;
    }
    expect(statuses).toEqual([503, 500, 503, 500, 500, 503]);
    expect((await token()).status).toBe(200);
    const lines = logged(log.lines.slice(before));
    expect(lines.map((l) => l.msg)).toEqual([
      OUTAGE,
      'token server error',
      'token server error',
      'token server error',
      BACK,
    ]);
    expect(lines[0]).toMatchObject({ level: 40, err: outage.message });
    for (const line of lines.slice(1, 4)) {
      expect(line.level).toBe(50);
      expect(line.err).toMatchObject({ code: '42P01', message: broken.message });
      expect((line.err as { stack: string }).stack).toContain('Error: relation');
    }
    expect(lines[4]).toMatchObject({ failures: 3 });
  });
});
