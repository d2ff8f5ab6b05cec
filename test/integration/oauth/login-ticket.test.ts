import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/schema.js';
import { createAtrium, type Atrium } from '../../../src/compose.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import {
  authorizeQuery,
  basic,
  cookieFrom,
  form,
  freePort,
  hiddenFields,
  pkce,
  REDIRECT,
  userWithPassword,
} from './support.js';

const MINUTE = 60_000;

/** A clock both instances share, so a ticket can be made to expire without waiting. */
const clock = {
  offsetMs: 0,
  now() {
    return new Date(Date.now() + this.offsetMs);
  },
};

/**
 * The consent page's login ticket is single-use across every instance: copying the consent form
 * (fields and the atrium_csrf cookie) and posting it again, to the same instance or another one
 * behind the same AUTH_URL, mints no second code. Real sockets, browser-like headers.
 */
describe('login tickets are single-use across instances', () => {
  let dir: string;
  let database: TestDatabase;
  let a: Atrium;
  let b: Atrium;
  let urlA: string;
  let urlB: string;
  let client: { client_id: string; client_secret: string };
  let user: { handle: string; password: string };
  const { verifier, challenge } = pkce();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-tickets-'));
    database = await freshDatabase();
    const url = database.dialect === 'sqlite' ? `sqlite:${join(dir, 'tickets.db')}` : database.url;
    // B is another instance of the same service: same issuer and store, its own port.
    urlA = `http://127.0.0.1:${await freePort()}`;
    const env = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      DATABASE_URL: url,
      HOST: '127.0.0.1',
      PUBLIC_URL: urlA,
    };
    a = await createAtrium(parseConfig({ ...env, PORT: new URL(urlA).port }), ['api', 'auth'], { clock });
    await a.listen();
    b = await createAtrium(parseConfig({ ...env, PORT: '0' }), ['api', 'auth'], { clock });
    urlB = (await b.listen()).httpUrl!;
    const c = await a.services.oauth.clients.create({ name: 'Third Party', redirectUris: [REDIRECT] });
    client = { client_id: c.client_id, client_secret: c.client_secret! };
    user = await userWithPassword({ services: a.services } as never);
  }, 60_000);
  afterAll(async () => {
    clock.offsetMs = 0;
    await a?.close();
    await b?.close();
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A POST as the browser sends the consent form: same-origin, with the CSRF cookie. */
  const post = (base: string, cookie: string, values: Record<string, string | undefined>) =>
    fetch(`${base}/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: new URL(urlA).origin,
        'sec-fetch-site': 'same-origin',
        cookie,
      },
      body: form(values),
    });

  /** Signs in on A up to the consent page; returns its fields and the browser's cookie. */
  async function consentForm(): Promise<{ cookie: string; fields: Record<string, string> }> {
    const query = form(authorizeQuery(client.client_id, challenge, { state: 's-1' }));
    const login = await fetch(`${urlA}/authorize?${query}`);
    expect(login.status).toBe(200);
    const cookie = cookieFrom(login.headers.getSetCookie())!;
    const consent = await post(urlA, cookie, {
      ...hiddenFields(await login.text()),
      username: user.handle,
      password: user.password,
    });
    expect(consent.status).toBe(200);
    const fields = hiddenFields(await consent.text());
    expect(fields.login_ticket).toBeDefined();
    return { cookie, fields };
  }

  const exchange = (code: string) =>
    fetch(`${urlA}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret),
      },
      body: form({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier }),
    });

  /** What an expired ticket gets today: the login page again, 400, asking to sign in again. */
  async function expectStale(res: Response): Promise<void> {
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    const html = await res.text();
    expect(html).toContain('Your sign-in expired. Please sign in again.');
    expect(html).toMatch(/name="password"/);
  }

  it('approves once; the same ticket again, on this instance or another, gets the stale-ticket page', async () => {
    const { cookie, fields } = await consentForm();
    const first = await post(urlA, cookie, { ...fields, consent: 'approve' });
    expect(first.status).toBe(302);
    const code = new URL(first.headers.get('location')!).searchParams.get('code')!;
    expect((await exchange(code)).status).toBe(200);

    await expectStale(await post(urlA, cookie, { ...fields, consent: 'approve' }));
    await expectStale(await post(urlB, cookie, { ...fields, consent: 'approve' }));
  });

  it('lets parallel approvals with one ticket mint exactly one code', async () => {
    const { cookie, fields } = await consentForm();
    const answers = await Promise.all(
      [urlA, urlB, urlA, urlB].map((base) => post(base, cookie, { ...fields, consent: 'approve' })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([302, 400, 400, 400]);
  });

  it('uses the ticket up on deny too: a later approve gets the stale-ticket page', async () => {
    const { cookie, fields } = await consentForm();
    const denied = await post(urlB, cookie, { ...fields, consent: 'deny' });
    expect(denied.status).toBe(302);
    expect(new URL(denied.headers.get('location')!).searchParams.get('error')).toBe('access_denied');
    await expectStale(await post(urlA, cookie, { ...fields, consent: 'approve' }));
    // A repeated deny is answered as a deny with a stale ticket always was: back to the client.
    const again = await post(urlA, cookie, { ...fields, consent: 'deny' });
    expect(again.status).toBe(302);
    expect(new URL(again.headers.get('location')!).searchParams.get('code')).toBeNull();
  });

  it('answers an expired ticket the same way, on either instance', async () => {
    const { cookie, fields } = await consentForm();
    clock.offsetMs = 10 * MINUTE + 1000;
    try {
      await expectStale(await post(urlB, cookie, { ...fields, consent: 'approve' }));
    } finally {
      clock.offsetMs = 0;
    }
    // Unused and unexpired, another copy of the form still works once (on the other instance).
    const fresh = await consentForm();
    expect((await post(urlB, fresh.cookie, { ...fresh.fields, consent: 'approve' })).status).toBe(302);
  });
});
