import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { behindProxyForSuite, postgresMissing } from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import {
  authorizeQuery,
  authorizeThroughForm,
  basic,
  form,
  pkce,
  REDIRECT,
  userWithPassword,
} from './support.js';
import { until } from '../../helpers/wait.js';

/**
 * docs/decisions.md D11: authorization codes never reach a log line, and errors keep their `code`
 * (ECONNREFUSED, 57P01), which an operator needs in an outage. Every line the server writes, at
 * trace level, is kept and searched for the code.
 */

/** Fails the next statement, after it ran, with `error` (a store failure with a code of its own). */
class FailNextStatement implements KyselyPlugin {
  error: Error | undefined;
  transformQuery({ node }: PluginTransformQueryArgs) {
    return node;
  }
  async transformResult({ result }: PluginTransformResultArgs) {
    const error = this.error;
    this.error = undefined;
    if (error) throw error;
    return result;
  }
}

type App = { client_id: string; client_secret: string };

/** A fresh code for `app` through the login form; the code and its PKCE verifier. */
async function issueCode(atrium: TestAtrium, app: App, user: { handle: string; password: string }) {
  const { verifier, challenge } = pkce();
  const res = await authorizeThroughForm(atrium, authorizeQuery(app.client_id, challenge), {
    username: user.handle,
    password: user.password,
  });
  expect(res.statusCode).toBe(302);
  const code = new URL(res.headers.location as string).searchParams.get('code');
  expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
  return { code: code!, verifier };
}

function exchange(atrium: TestAtrium, app: App, code: string, verifier: string) {
  return atrium.http!.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic(app.client_id, app.client_secret),
    },
    payload: form({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    }),
  });
}

const text = (lines: Array<Record<string, unknown>>) => lines.map((l) => JSON.stringify(l)).join('\n');

describe('authorization codes in the logs', () => {
  const log = memoryLog('trace');
  const failNext = new FailNextStatement();
  let atrium: TestAtrium;
  let app: App;
  let user: { handle: string; password: string };

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { logger: log.logger, storePlugins: [failNext] });
    const c = await atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: [REDIRECT],
      firstParty: true,
    });
    app = { client_id: c.client_id, client_secret: c.client_secret! };
    user = await userWithPassword(atrium);
  });
  afterAll(() => atrium?.stop());

  it('never appear: not from the redirect, the exchange, a replay, a bad verifier or a failed exchange', async () => {
    const codes: string[] = [];

    const first = await issueCode(atrium, app, user);
    codes.push(first.code);
    expect((await exchange(atrium, app, first.code, first.verifier)).statusCode).toBe(200);
    const replay = await exchange(atrium, app, first.code, first.verifier);
    expect(replay.statusCode).toBe(400);
    expect(replay.json()).toMatchObject({ error: 'invalid_grant' });

    const second = await issueCode(atrium, app, user);
    codes.push(second.code);
    expect((await exchange(atrium, app, second.code, pkce().verifier)).statusCode).toBe(400);

    // Swagger UI's redirect page on this server receives a code in its query.
    const page = await atrium.http!.inject({
      method: 'GET',
      url: `/docs/static/oauth2-redirect.html?code=${second.code}&state=s`,
    });
    expect(page.statusCode).toBe(200);

    // The store fails under the exchange with an error that has a code: the server logs it in full.
    failNext.error = Object.assign(new Error('disk I/O error'), { code: 'EIO' });
    const failed = await exchange(atrium, app, second.code, second.verifier);
    expect(failed.statusCode).toBe(500);

    const lines = log.lines;
    expect(lines.filter((l) => l.msg === 'request').length).toBeGreaterThanOrEqual(7);
    for (const code of codes) expect(text(lines)).not.toContain(code);

    const failure = lines.find((l) => l.msg === 'token server error') as { err?: { code?: unknown } };
    expect(failure?.err?.code).toBe('EIO');
    expect(text(lines)).not.toContain('[redacted]');
  });
});

const skip = await postgresMissing();

describe.skipIf(skip !== undefined)('authorization codes in the logs while PostgreSQL is unreachable', () => {
  const log = memoryLog('trace');
  const env = behindProxyForSuite({}, ['auth'], { logger: log.logger });

  it("log the connection failure's code and never the code sent to /oauth/token", async () => {
    const c = await env.atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: [REDIRECT],
      firstParty: true,
    });
    const code = 'k'.repeat(43);
    await env.cutDatabase();
    try {
      const post = () =>
        fetch(`${env.httpUrl}/oauth/token`, {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: basic(c.client_id, c.client_secret!),
          },
          body: form({
            grant_type: 'authorization_code',
            code,
            redirect_uri: REDIRECT,
            code_verifier: pkce().verifier,
          }),
        });
      // The outage is logged once, with the driver's code beside its message (not under `err`).
      const coded = () => log.lines.filter((l) => typeof l.code === 'string');
      // The pool's first failure may be its dropped connection (no code); a new connection is refused.
      await until(() => env.atrium.services.store.poolStats()!.total === 0, 'the pool emptied');
      for (let i = 0; i < 5; i += 1) {
        const res = await post();
        expect(res.status).toBe(503);
      }
      const codes = coded().map((l) => l.code as string);
      expect(codes).toHaveLength(1);
      for (const c of codes) expect(c).toMatch(/^(ECONNREFUSED|ECONNRESET|EPIPE|57P0\d|08\d\d\d)$/);
      expect(text(log.lines)).not.toContain(code);
      expect(text(log.lines)).not.toContain('[redacted]');
    } finally {
      await env.restoreDatabase();
    }
  });
});
