import { beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeQuery,
  authorizeThroughForm,
  basic,
  cookieFrom,
  form,
  hiddenFields,
  oauthServerForSuite,
  pkce,
  REDIRECT,
  userWithPassword,
} from './support.js';

describe('the authorization endpoint and its pages', () => {
  const server = oauthServerForSuite();
  let thirdParty: { client_id: string; client_secret: string };
  let firstParty: { client_id: string; client_secret: string };
  let user: { id: string; handle: string; password: string };
  const { verifier, challenge } = pkce();

  beforeAll(async () => {
    const clients = server.atrium.services.oauth.clients;
    const t = await clients.create({
      name: 'Third <Party> App',
      redirectUris: [REDIRECT, 'http://127.0.0.1:8080/callback'],
    });
    thirdParty = { client_id: t.client_id, client_secret: t.client_secret! };
    const f = await clients.create({ name: 'Atrium Web', redirectUris: [REDIRECT], firstParty: true });
    firstParty = { client_id: f.client_id, client_secret: f.client_secret! };
    user = await userWithPassword(server.atrium);
  });

  const query = (overrides: Record<string, string | undefined> = {}) =>
    authorizeQuery(thirdParty.client_id, challenge, { state: 'state-123', ...overrides });
  const get = (q: Record<string, string | undefined>) =>
    server.atrium.http!.inject({ method: 'GET', url: `/authorize?${form(q)}` });
  const post = (values: Record<string, string | undefined>, headers: Record<string, string> = {}) =>
    server.atrium.http!.inject({
      method: 'POST',
      url: '/authorize',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: form(values),
    });
  async function loginPage(q = query()) {
    const page = await get(q);
    expect(page.statusCode).toBe(200);
    return {
      page,
      cookie: cookieFrom(page.headers['set-cookie'] as string)!,
      fields: hiddenFields(page.body),
    };
  }

  it('serves an accessible login page with no script, a strict CSP and a CSRF cookie', async () => {
    const { page, cookie, fields } = await loginPage();
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const csp = page.headers['content-security-policy'] as string;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("style-src 'self'");
    // Here, AUTH_URL's origin (a page opened at another name is sent there) and the client's.
    expect(csp).toContain(`form-action 'self' ${server.url} https://app.example.com;`);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.body).not.toMatch(/<script|\son[a-z]+=|style=/i);
    expect(page.body).toContain('<html lang="en">');
    expect(page.body).toMatch(/<label for="username">[^<]+<\/label>\s*<input id="username" name="username"/);
    expect(page.body).toMatch(
      /<label for="password">[^<]+<\/label>\s*<input id="password" name="password" type="password"/,
    );
    expect(page.body).toContain('Third &lt;Party&gt; App');
    const setCookie = page.headers['set-cookie'] as string;
    expect(setCookie).toMatch(/HttpOnly/);
    // Lax: sent on the cross-site navigation that starts a flow, so a second tab keeps the first's.
    expect(setCookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/^atrium_csrf=/);
    expect(fields).toMatchObject({
      client_id: thirdParty.client_id,
      redirect_uri: REDIRECT,
      state: 'state-123',
      code_challenge_method: 'S256',
    });
    expect(fields.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const css = await server.atrium.http!.inject({ method: 'GET', url: '/oauth/assets/pages.css' });
    expect(css.statusCode).toBe(200);
    expect(css.headers['content-type']).toMatch(/^text\/css/);
  });

  it('shows an error page, never a redirect, for an unknown client or an inexact redirect URI', async () => {
    const variants = [
      `${REDIRECT}/extra`,
      `${REDIRECT}?x=1`,
      `${REDIRECT}/`,
      'https://APP.example.com/cb',
      'https://app.example.com/CB',
      'https://app.example.com:443/cb',
      'https://app.example.com:8443/cb',
      'https://evil@app.example.com/cb',
      'https://app.example.com@evil.example/cb',
      'http://app.example.com/cb',
      `${REDIRECT}#frag`,
      'https://app.example.com/c%62',
      'http://127.0.0.1:8081/callback',
      'http://localhost:8080/callback',
      'https://evil.example/cb',
    ];
    const requests = [
      query({ client_id: 'cli_unknown' }),
      query({ client_id: undefined }),
      query({ redirect_uri: undefined }),
      ...variants.map((redirect_uri) => query({ redirect_uri })),
    ];
    for (const q of requests) {
      for (const res of [await get(q), await post(q)]) {
        expect(res.statusCode, JSON.stringify(q)).toBe(400);
        expect(res.headers.location).toBeUndefined();
        expect(res.headers['content-type']).toMatch(/^text\/html/);
        expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      }
    }
    const repeated = await server.atrium.http!.inject({
      method: 'GET',
      url: `/authorize?${form(query())}&client_id=${firstParty.client_id}`,
    });
    expect(repeated.statusCode).toBe(400);
    expect(repeated.headers.location).toBeUndefined();
  });

  it('redirects other errors back with error and state: implicit is unsupported_response_type', async () => {
    const cases: [Record<string, string | undefined>, string][] = [
      [{ response_type: 'token' }, 'unsupported_response_type'],
      [{ response_type: 'code token' }, 'unsupported_response_type'],
      [{ response_type: 'id_token' }, 'unsupported_response_type'],
      [{ response_type: undefined }, 'invalid_request'],
      [{ scope: 'profile:read superuser' }, 'invalid_scope'],
      [{ response_mode: 'fragment' }, 'invalid_request'],
    ];
    for (const [overrides, error] of cases) {
      const res = await get(query(overrides));
      expect(res.statusCode).toBe(302);
      const location = new URL(res.headers.location as string);
      expect(location.origin + location.pathname).toBe(REDIRECT);
      expect(location.searchParams.get('error')).toBe(error);
      expect(location.searchParams.get('state')).toBe('state-123');
      expect(location.searchParams.get('iss')).toBe(server.url);
    }
    const dup = await server.atrium.http!.inject({
      method: 'GET',
      url: `/authorize?${form(query())}&scope=orders:read`,
    });
    expect(new URL(dup.headers.location as string).searchParams.get('error')).toBe('invalid_request');
  });

  it('refuses a browser post without the CSRF cookie, with a foreign token, or from another site', async () => {
    const { cookie, fields } = await loginPage();
    const other = await loginPage();
    const creds = { username: user.handle, password: user.password, consent: 'approve' };
    const attempts = [
      post({ ...fields, ...creds }, { origin: server.url }),
      post({ ...fields, ...creds }, { 'sec-fetch-site': 'same-origin' }),
      post({ ...fields, ...creds, csrf_token: undefined }, { cookie }),
      post({ ...fields, ...creds, csrf_token: other.fields.csrf_token }, { cookie }),
      post({ ...fields, ...creds }, { cookie: other.cookie }),
      post({ ...fields, ...creds }, { cookie, origin: 'https://evil.example' }),
      post({ ...fields, ...creds }, { cookie, origin: 'null' }),
      post({ ...fields, ...creds }, { cookie, origin: 'null', 'sec-fetch-site': 'cross-site' }),
      post({ ...fields, ...creds }, { origin: 'null', 'sec-fetch-site': 'same-origin' }),
      post(
        { ...fields, ...creds, csrf_token: other.fields.csrf_token },
        { cookie, origin: 'null', 'sec-fetch-site': 'same-origin' },
      ),
      post({ ...fields, ...creds }, { cookie, 'sec-fetch-site': 'cross-site' }),
      post({ ...fields, ...creds }, { cookie, 'sec-fetch-site': 'same-site' }),
      post({ ...fields, ...creds }, { origin: 'https://evil.example' }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.statusCode).toBe(403);
      expect(res.headers.location).toBeUndefined();
      expect(res.body).toContain('role="alert"');
    }
    const ok = await post(
      { ...fields, ...creds },
      { cookie, origin: server.url, 'sec-fetch-site': 'same-origin' },
    );
    expect(ok.statusCode).toBe(302);
  });

  it('serves the pages under a referrer policy that lets the browser name its origin on the post', async () => {
    // Under no-referrer a browser posts the form with `Origin: null`: real sign-ins failed so.
    const { page, cookie, fields } = await loginPage();
    expect(page.headers['referrer-policy']).toBe('same-origin');
    expect(page.body).toContain('<meta name="referrer" content="same-origin">');
    // A browser whose own privacy setting still hides the origin: Fetch metadata vouches for it.
    const creds = { username: user.handle, password: user.password, consent: 'approve' };
    const hidden = await post(
      { ...fields, ...creds },
      { cookie, origin: 'null', 'sec-fetch-site': 'same-origin' },
    );
    expect(hidden.statusCode).toBe(302);
    // The redirect to the client leaves no Referer behind.
    expect(hidden.headers['referrer-policy']).toBe('no-referrer');
  });

  it('serves a non-browser client that posts the original parameters, credentials and consent', async () => {
    // No cookie, no Origin, no Sec-Fetch-Site: nothing a victim's browser could be made to send.
    const direct = await post({
      ...query(),
      username: user.handle,
      password: user.password,
      consent: 'approve',
    });
    expect(direct.statusCode).toBe(302);
    expect(new URL(direct.headers.location as string).searchParams.get('code')).toBeTruthy();
    // Posting to the authorization URL itself, with only the credentials in the body, works too.
    const toUrl = await server.atrium.http!.inject({
      method: 'POST',
      url: `/authorize?${form(query())}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: form({ username: user.handle, password: user.password, consent: 'approve' }),
    });
    expect(toUrl.statusCode).toBe(302);
    expect(new URL(toUrl.headers.location as string).searchParams.get('state')).toBe('state-123');
    // Two steps without cookies: the consent page's login ticket carries the sign-in.
    const consent = await post({ ...query(), username: user.handle, password: user.password });
    expect(consent.statusCode).toBe(200);
    const approved = await post({ ...hiddenFields(consent.body), consent: 'approve' });
    expect(approved.statusCode).toBe(302);
    expect(new URL(approved.headers.location as string).searchParams.get('code')).toBeTruthy();
  });

  it('shows the login page again for a wrong password, escaping what was typed', async () => {
    const { cookie, fields } = await loginPage();
    const res = await post(
      { ...fields, username: '<script>alert(1)</script>', password: 'nope' },
      { cookie },
    );
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain('role="alert"');
    expect(res.body).not.toContain('<script>');
    expect(res.body).toContain('&lt;script&gt;');
    const wrong = await post({ ...fields, username: user.handle, password: 'wrong password' }, { cookie });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain('incorrect');
  });

  it('escapes request parameters carried in hidden fields', async () => {
    const { page, fields } = await loginPage(query({ state: '"><script>alert(1)</script>' }));
    expect(page.body).not.toContain('<script>');
    expect(fields.state).toBe('"><script>alert(1)</script>');
  });

  it('asks a third-party client consent after login, then approves with the login ticket', async () => {
    const { cookie, fields } = await loginPage(query({ scope: 'profile:read orders:read' }));
    const consent = await post({ ...fields, username: user.handle, password: user.password }, { cookie });
    expect(consent.statusCode).toBe(200);
    expect(consent.body).toContain('Allow Third &lt;Party&gt; App');
    expect(consent.body).toContain('<code>orders:read</code>');
    expect(consent.body).toContain('name="consent" value="approve"');
    const consentFields = hiddenFields(consent.body);
    expect(consentFields.login_ticket).toBeDefined();
    expect(consentFields.password).toBeUndefined();

    const approved = await post({ ...consentFields, consent: 'approve' }, { cookie });
    expect(approved.statusCode).toBe(302);
    const location = new URL(approved.headers.location as string);
    expect(location.searchParams.get('state')).toBe('state-123');
    const code = location.searchParams.get('code')!;
    const token = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(thirdParty.client_id, thirdParty.client_secret),
      },
      payload: form({
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      }),
    });
    expect(token.statusCode).toBe(200);
    expect(token.json().scope).toBe('profile:read orders:read');
  });

  it('refuses a tampered login ticket or one from another browser', async () => {
    const { cookie, fields } = await loginPage();
    const consent = await post({ ...fields, username: user.handle, password: user.password }, { cookie });
    const consentFields = hiddenFields(consent.body);
    const tampered = await post(
      { ...consentFields, login_ticket: `${consentFields.login_ticket}x`, consent: 'approve' },
      { cookie },
    );
    expect(tampered.statusCode).toBe(400);
    expect(tampered.headers.location).toBeUndefined();

    const elsewhere = await loginPage();
    const stolen = await post(
      { ...consentFields, csrf_token: elsewhere.fields.csrf_token, consent: 'approve' },
      { cookie: elsewhere.cookie },
    );
    expect(stolen.statusCode).toBe(400);
    expect(stolen.headers.location).toBeUndefined();

    const otherRequest = await post({ ...consentFields, state: 'different', consent: 'approve' }, { cookie });
    expect(otherRequest.statusCode).toBe(400);
  });

  it('redirects with access_denied when the user denies', async () => {
    const { cookie, fields } = await loginPage();
    const consent = await post({ ...fields, username: user.handle, password: user.password }, { cookie });
    const denied = await post({ ...hiddenFields(consent.body), consent: 'deny' }, { cookie });
    expect(denied.statusCode).toBe(302);
    const location = new URL(denied.headers.location as string);
    expect(location.searchParams.get('error')).toBe('access_denied');
    expect(location.searchParams.get('state')).toBe('state-123');
    expect(location.searchParams.get('code')).toBeNull();
  });

  it('skips consent for a first-party client and accepts username, password and consent in one post', async () => {
    const direct = await authorizeThroughForm(server.atrium, query({ client_id: firstParty.client_id }), {
      username: user.handle,
      password: user.password,
    });
    expect(direct.statusCode).toBe(302);
    expect(new URL(direct.headers.location as string).searchParams.get('code')).toBeTruthy();

    const oneStep = await authorizeThroughForm(server.atrium, query(), {
      username: `${user.handle}@example.com`,
      password: user.password,
      consent: 'approve',
    });
    expect(oneStep.statusCode).toBe(302);
    expect(new URL(oneStep.headers.location as string).searchParams.get('code')).toBeTruthy();
  });

  it("grants only what the user's role allows", async () => {
    const viewer = await userWithPassword(server.atrium, { role: 'viewer' });
    const res = await authorizeThroughForm(
      server.atrium,
      query({ client_id: firstParty.client_id, scope: 'profile:read orders:write' }),
      { username: viewer.handle, password: viewer.password },
    );
    const code = new URL(res.headers.location as string).searchParams.get('code')!;
    const token = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(firstParty.client_id, firstParty.client_secret),
      },
      payload: form({
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      }),
    });
    expect(token.json().scope).toBe('profile:read');

    const writeOnly = await authorizeThroughForm(
      server.atrium,
      query({ client_id: firstParty.client_id, scope: 'orders:write' }),
      { username: viewer.handle, password: viewer.password },
    );
    expect(new URL(writeOnly.headers.location as string).searchParams.get('error')).toBe('invalid_scope');
  });

  it('answers a post that is not a form with an error page', async () => {
    const res = await server.atrium.http!.inject({
      method: 'POST',
      url: '/authorize',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(query()),
    });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
  });
});
