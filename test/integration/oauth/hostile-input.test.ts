import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, form, pkce, startOAuthServer, userWithPassword, type OAuthTestServer } from './support.js';

const REDIRECT = 'https://app.example.com/cb';
const NUL = '\u0000';

/** Control characters and odd encodings anywhere in a token-server request: a 4xx, never a 500. */
describe('hostile input on every token-server endpoint', () => {
  let server: OAuthTestServer;
  let client: { client_id: string; client_secret: string };
  let user: { handle: string; password: string };

  beforeAll(async () => {
    server = await startOAuthServer();
    const c = await server.atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: [REDIRECT],
      firstParty: true,
    });
    client = { client_id: c.client_id, client_secret: c.client_secret! };
    user = await userWithPassword(server.atrium);
  });
  afterAll(async () => {
    await server.stop();
  });

  const tokenPost = (payload: string, authorization?: string) =>
    server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(authorization ? { authorization } : {}),
      },
      payload,
    });

  it('token endpoint: NUL in the client id, the secret and every parameter', async () => {
    const auth = basic(client.client_id, client.client_secret);
    // Each bad request gets the answer its fault calls for (RFC 6749 §5.2), never a 5xx.
    const cases: Array<[number, string, Awaited<ReturnType<typeof tokenPost>>]> = [
      [
        401,
        'invalid_client',
        await tokenPost(
          form({ grant_type: 'client_credentials' }),
          basic(`${client.client_id}${NUL}`, client.client_secret),
        ),
      ],
      [
        401,
        'invalid_client',
        await tokenPost(
          form({ grant_type: 'client_credentials' }),
          basic(client.client_id, `${client.client_secret}${NUL}`),
        ),
      ],
      [
        400,
        'unsupported_grant_type',
        await tokenPost(form({ grant_type: `client_credentials${NUL}` }), auth),
      ],
      [
        400,
        'invalid_scope',
        await tokenPost(form({ grant_type: 'client_credentials', scope: `profile:read${NUL}` }), auth),
      ],
      [
        401,
        'invalid_grant',
        await tokenPost(form({ grant_type: 'refresh_token', refresh_token: `art_${NUL}` }), auth),
      ],
      [
        400,
        'invalid_grant',
        await tokenPost(
          form({
            grant_type: 'authorization_code',
            code: NUL,
            redirect_uri: REDIRECT,
            code_verifier: pkce().verifier,
          }),
          auth,
        ),
      ],
      [
        401,
        'invalid_client',
        await tokenPost(
          form({
            grant_type: 'authorization_code',
            client_id: `${NUL}`,
            code: 'x',
            redirect_uri: REDIRECT,
            code_verifier: pkce().verifier,
          }),
        ),
      ],
      [
        401,
        'invalid_client',
        await tokenPost(
          form({ grant_type: 'client_credentials' }),
          `Basic ${Buffer.from('\u00ff\u00fe:%E0%A4%A').toString('base64')}`,
        ),
      ],
    ];
    // A stray percent sign is not an error: the odd parameter is simply unknown and ignored.
    const stray = await tokenPost('grant_type=client_credentials&%ZZ=%', auth);
    expect(stray.statusCode).toBe(200);
    for (const [status, error, res] of cases) {
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json().error, res.body).toBe(error);
    }
  });

  it('refresh and introspection endpoints', async () => {
    const refresh = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token: `art_${NUL}`, client_id: `${client.client_id}${NUL}` },
    });
    expect(refresh.statusCode).toBe(401);
    const introspect = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret),
      },
      payload: form({ token: `art_${NUL}${'A'.repeat(42)}` }),
    });
    expect(introspect.statusCode).toBe(200);
    expect(introspect.json()).toEqual({ active: false });
  });

  it('authorization endpoint and login form', async () => {
    const { challenge } = pkce();
    const q = {
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: REDIRECT,
      state: 's',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    };
    // An unknown client or redirect URI is an error page, never a redirect; `state` is opaque.
    for (const [bad, expected] of [
      [{ client_id: `${client.client_id}${NUL}` }, 400],
      [{ redirect_uri: `${REDIRECT}${NUL}` }, 400],
      [{ state: `a${NUL}b` }, 200],
    ] as const) {
      const res = await server.atrium.http!.inject({
        method: 'GET',
        url: `/authorize?${form({ ...q, ...bad })}`,
      });
      expect(res.statusCode, JSON.stringify(bad)).toBe(expected);
    }
    for (const creds of [
      { username: `${user.handle}${NUL}`, password: user.password },
      { username: user.handle, password: `${NUL}${user.password}` },
      { username: `${NUL}`, password: `${NUL}` },
    ]) {
      const res = await server.atrium.http!.inject({
        method: 'POST',
        url: '/authorize',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: form({ ...q, ...creds, consent: 'approve' }),
      });
      expect(res.statusCode).toBe(400);
      expect(res.body).toContain('incorrect');
    }
  });

  it('bearer tokens with control characters', async () => {
    for (const token of [`a${NUL}.b.c`, `art_${NUL}`]) {
      const res = await server.atrium.http!.inject({
        method: 'GET',
        url: '/api/user/profile',
        headers: { authorization: `Bearer ${encodeURIComponent(token)}` },
      });
      expect(res.statusCode).toBe(401);
    }
  });
});
