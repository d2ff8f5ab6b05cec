import * as oauth from 'oauth4webapi';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeQuery,
  authorizeThroughForm,
  basic,
  codeFlowSuite,
  cookieFrom,
  form,
  hiddenFields,
  insecure,
  pkce,
  REDIRECT,
} from './support.js';

describe('authorization code with PKCE', () => {
  const { server, flow } = codeFlowSuite();
  let publicClient: { client_id: string };

  beforeAll(async () => {
    publicClient = await server.atrium.services.oauth.clients.create({
      name: 'Mobile',
      redirectUris: [REDIRECT],
      public: true,
      firstParty: true,
    });
  });

  /** What a browser does: open the authorization URL, post the login form, follow nothing. */
  async function browserLogin(authorizationUrl: URL): Promise<URL> {
    const page = await fetch(authorizationUrl, { redirect: 'manual' });
    expect(page.status).toBe(200);
    const cookie = cookieFrom(page.headers.get('set-cookie'));
    const fields = hiddenFields(await page.text());
    const posted = await fetch(`${server.url}/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie!, origin: server.url },
      body: form({ ...fields, username: flow.user.handle, password: flow.user.password, consent: 'approve' }),
    });
    expect(posted.status).toBe(302);
    return new URL(posted.headers.get('location')!);
  }

  it('runs the whole flow with oauth4webapi: authorize, log in, exchange, use', async () => {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(flow.as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: flow.app.client_id,
      redirect_uri: REDIRECT,
      scope: 'profile:read orders:read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    const callback = await browserLogin(url);
    expect(callback.origin + callback.pathname).toBe(REDIRECT);
    expect(callback.searchParams.get('iss')).toBe(server.url);

    const client = { client_id: flow.app.client_id };
    const params = oauth.validateAuthResponse(flow.as, client, callback, state);
    const response = await oauth.authorizationCodeGrantRequest(
      flow.as,
      client,
      oauth.ClientSecretBasic(flow.app.client_secret),
      params,
      REDIRECT,
      verifier,
      insecure,
    );
    expect(response.headers.get('cache-control')).toBe('no-store');
    const tokens = await oauth.processAuthorizationCodeResponse(flow.as, client, response);
    expect(tokens.expires_in).toBe(900);
    expect(tokens.refresh_token).toMatch(/^art_/);
    expect(tokens.scope).toBe('profile:read orders:read');

    const claims = await oauth.validateJwtAccessToken(
      flow.as,
      new Request(`${server.url}/api/user/profile`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      }),
      server.url,
      insecure,
    );
    expect(claims.sub).toBe(flow.user.id);
    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(await profile.json()).toMatchObject({
      user_id: flow.user.id,
      scopes: ['orders:read', 'profile:read'],
    });
  });

  it('lets a public client exchange with client_id and its verifier only', async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(publicClient.client_id, challenge);
    const res = await exchange({
      client_id: publicClient.client_id,
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().refresh_token).toMatch(/^art_/);
  });

  it('refuses authorization requests without S256 PKCE, redirecting with error and state', async () => {
    const base = {
      response_type: 'code',
      client_id: flow.app.client_id,
      redirect_uri: REDIRECT,
      state: 'st-1',
    };
    const { challenge } = pkce();
    for (const extra of [
      {},
      { code_challenge: challenge },
      { code_challenge: challenge, code_challenge_method: 'plain' },
      { code_challenge: 'short', code_challenge_method: 'S256' },
      { code_challenge_method: 'S256' },
    ]) {
      const res = await server.atrium.http!.inject({
        method: 'GET',
        url: `/authorize?${form({ ...base, ...extra })}`,
      });
      expect(res.statusCode).toBe(302);
      const location = new URL(res.headers.location as string);
      expect(location.origin + location.pathname).toBe(REDIRECT);
      expect(location.searchParams.get('error')).toBe('invalid_request');
      expect(location.searchParams.get('state')).toBe('st-1');
      expect(location.searchParams.get('code')).toBeNull();
    }
  });

  it('refuses a missing verifier and verifiers of the wrong length or alphabet, without using up the code', async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(flow.app.client_id, challenge);
    const bad = [
      undefined,
      'a'.repeat(42),
      'a'.repeat(129),
      `${'a'.repeat(42)}!`,
      `${'a'.repeat(42)} `,
      `${'é'.repeat(43)}`,
      `${'a'.repeat(42)}+`,
    ];
    for (const code_verifier of bad) {
      const res = await exchange({ code, redirect_uri: REDIRECT, code_verifier }, flow.app);
      expect(res.statusCode, String(code_verifier)).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
    const wrong = await exchange({ code, redirect_uri: REDIRECT, code_verifier: pkce().verifier }, flow.app);
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().error).toBe('invalid_grant');
    const right = await exchange({ code, redirect_uri: REDIRECT, code_verifier: verifier }, flow.app);
    expect(right.statusCode).toBe(200);
  });

  it('binds the code to its client and redirect URI', async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(flow.app.client_id, challenge);
    const otherClient = await exchange({
      client_id: publicClient.client_id,
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    });
    expect(otherClient.json().error).toBe('invalid_grant');
    const otherUri = await exchange(
      { code, redirect_uri: `${REDIRECT}/x`, code_verifier: verifier },
      flow.app,
    );
    expect(otherUri.json().error).toBe('invalid_grant');
    const noUri = await exchange({ code, code_verifier: verifier }, flow.app);
    expect(noUri.json().error).toBe('invalid_request');
    const unknown = await exchange(
      { code: 'A'.repeat(43), redirect_uri: REDIRECT, code_verifier: verifier },
      flow.app,
    );
    expect(unknown.json().error).toBe('invalid_grant');
  });

  it('fails a second exchange of a code and revokes everything the first one issued', async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(flow.app.client_id, challenge);
    const first = await exchange({ code, redirect_uri: REDIRECT, code_verifier: verifier }, flow.app);
    expect(first.statusCode).toBe(200);
    const tokens = first.json();
    const before = await profile(tokens.access_token);
    expect(before.statusCode).toBe(200);

    const second = await exchange({ code, redirect_uri: REDIRECT, code_verifier: verifier }, flow.app);
    expect(second.statusCode).toBe(400);
    expect(second.json().error).toBe('invalid_grant');

    const after = await profile(tokens.access_token);
    expect(after.statusCode).toBe(401);
    expect(after.headers['www-authenticate']).toContain('error="invalid_token"');
    const refreshed = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token: tokens.refresh_token, client_id: flow.app.client_id },
    });
    expect(refreshed.statusCode).toBe(401);
  });

  it('gives parallel exchanges of one code one winner and no 500', async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(flow.app.client_id, challenge);
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        exchange({ code, redirect_uri: REDIRECT, code_verifier: verifier }, flow.app),
      ),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([200, 400, 400, 400, 400]);
  });

  async function codeFor(clientId: string, challenge: string, scope = 'profile:read'): Promise<string> {
    const res = await authorizeThroughForm(server.atrium, authorizeQuery(clientId, challenge, { scope }), {
      username: flow.user.handle,
      password: flow.user.password,
    });
    expect(res.statusCode).toBe(302);
    return new URL(res.headers.location as string).searchParams.get('code')!;
  }

  function exchange(
    values: Record<string, string | undefined>,
    auth?: { client_id: string; client_secret: string },
  ) {
    return server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(auth ? { authorization: basic(auth.client_id, auth.client_secret) } : {}),
      },
      payload: form({ grant_type: 'authorization_code', ...values }),
    });
  }

  function profile(token: string) {
    return server.atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { authorization: `Bearer ${token}` },
    });
  }
});
