import { describe, expect, it } from 'vitest';
import { authorizeQuery, basic, codeFlowSuite, form, pkce, REDIRECT } from './support.js';

const NUL = '\u0000';

/** Control characters and odd encodings anywhere in a token-server request: a 4xx, never a 500. */
describe('hostile input on every token-server endpoint', () => {
  const { server, flow } = codeFlowSuite();

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
    const auth = basic(flow.app.client_id, flow.app.client_secret);
    // Each bad request gets the answer its fault calls for (RFC 6749 §5.2), never a 5xx.
    const cases: Array<[number, string, Awaited<ReturnType<typeof tokenPost>>]> = [
      [
        401,
        'invalid_client',
        await tokenPost(
          form({ grant_type: 'client_credentials' }),
          basic(`${flow.app.client_id}${NUL}`, flow.app.client_secret),
        ),
      ],
      [
        401,
        'invalid_client',
        await tokenPost(
          form({ grant_type: 'client_credentials' }),
          basic(flow.app.client_id, `${flow.app.client_secret}${NUL}`),
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
      payload: { refresh_token: `art_${NUL}`, client_id: `${flow.app.client_id}${NUL}` },
    });
    expect(refresh.statusCode).toBe(401);
    const introspect = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(flow.app.client_id, flow.app.client_secret),
      },
      payload: form({ token: `art_${NUL}${'A'.repeat(42)}` }),
    });
    expect(introspect.statusCode).toBe(200);
    expect(introspect.json()).toEqual({ active: false });
  });

  it('authorization endpoint and login form', async () => {
    const { challenge } = pkce();
    // This request names no scope.
    const q = authorizeQuery(flow.app.client_id, challenge, { scope: undefined });
    // An unknown client or redirect URI is an error page, never a redirect; `state` is opaque.
    for (const [bad, expected] of [
      [{ client_id: `${flow.app.client_id}${NUL}` }, 400],
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
      { username: `${flow.user.handle}${NUL}`, password: flow.user.password },
      { username: flow.user.handle, password: `${NUL}${flow.user.password}` },
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
