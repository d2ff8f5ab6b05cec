import * as oauth from 'oauth4webapi';
import { describe, expect, it } from 'vitest';
import { basic, codeFlowSuite, codeFlowTokens, form, insecure, REDIRECT } from './support.js';

/** A clock the test can move: refresh tokens live 30 days. */
const clock = {
  offsetMs: 0,
  now() {
    return new Date(Date.now() + this.offsetMs);
  },
};

describe('refresh-token rotation', () => {
  const { server, flow } = codeFlowSuite({}, clock);

  const tokens = () => codeFlowTokens(server.atrium, flow.app, flow.user);
  const jsonRefresh = (refresh_token: unknown, client_id: unknown = flow.app.client_id) =>
    server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token, client_id },
    });
  const grantRefresh = (refresh_token: string, extra: Record<string, string> = {}) =>
    server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(flow.app.client_id, flow.app.client_secret),
      },
      payload: form({ grant_type: 'refresh_token', refresh_token, ...extra }),
    });
  const profile = (token: string) =>
    server.atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { authorization: `Bearer ${token}` },
    });

  it('rotates through oauth4webapi with the refresh_token grant', async () => {
    const first = await tokens();
    const c = { client_id: flow.app.client_id };
    const response = await oauth.refreshTokenGrantRequest(
      flow.as,
      c,
      oauth.ClientSecretBasic(flow.app.client_secret),
      first.refresh_token,
      insecure,
    );
    expect(response.headers.get('cache-control')).toBe('no-store');
    const next = await oauth.processRefreshTokenResponse(flow.as, c, response);
    expect(next.refresh_token).toMatch(/^art_/);
    expect(next.refresh_token).not.toBe(first.refresh_token);
    expect(next.access_token).not.toBe(first.access_token);
    expect(next.expires_in).toBe(900);
    expect((await profile(next.access_token)).statusCode).toBe(200);
  });

  it('lets oauth4webapi see invalid_grant on a reused, unknown or revoked refresh token, not a challenge', async () => {
    const first = await tokens();
    const c = { client_id: flow.app.client_id };
    const auth = oauth.ClientSecretBasic(flow.app.client_secret);
    const refresh = (token: string) => oauth.refreshTokenGrantRequest(flow.as, c, auth, token, insecure);
    await oauth.processRefreshTokenResponse(flow.as, c, await refresh(first.refresh_token));

    // A Bearer challenge on the token endpoint made processRefreshTokenResponse throw
    // WWWAuthenticateChallengeError, so the application never learned the grant was dead.
    for (const token of [first.refresh_token, 'art_' + 'B'.repeat(43), first.refresh_token]) {
      const response = await refresh(token);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBeNull();
      const refused = await oauth.processRefreshTokenResponse(flow.as, c, response).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(oauth.ResponseBodyError);
      expect((refused as oauth.ResponseBodyError).error).toBe('invalid_grant');
      expect((refused as oauth.ResponseBodyError).status).toBe(401);
    }
  });

  it('answers the JSON endpoint in the spec shape and chains rotations', async () => {
    let current = (await tokens()).refresh_token;
    for (let i = 0; i < 3; i++) {
      const res = await jsonRefresh(current);
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type']);
      expect(body.token_type).toBe('Bearer');
      expect(body.expires_in).toBe(900);
      current = body.refresh_token;
    }
  });

  it('revokes the whole family when a rotated token is reused', async () => {
    const first = await tokens();
    const second = (await jsonRefresh(first.refresh_token)).json();
    const reuse = await jsonRefresh(first.refresh_token);
    expect(reuse.statusCode).toBe(401);
    expect(reuse.json().error).toBe('invalid_grant');
    expect(reuse.json().error_description).toMatch(/already used/);
    // The family is gone: the newest refresh token and the access tokens stop working too.
    const newest = await jsonRefresh(second.refresh_token);
    expect(newest.statusCode).toBe(401);
    expect(newest.json().error_description).toMatch(/revoked/);
    expect((await profile(second.access_token)).statusCode).toBe(401);
    expect((await profile(first.access_token)).statusCode).toBe(401);
  });

  it('applies the same rules on the standard grant', async () => {
    const first = await tokens();
    const next = await grantRefresh(first.refresh_token);
    expect(next.statusCode).toBe(200);
    const reuse = await grantRefresh(first.refresh_token);
    expect(reuse.statusCode).toBe(401);
    expect(reuse.json().error).toBe('invalid_grant');
    expect((await grantRefresh(next.json().refresh_token)).statusCode).toBe(401);
  });

  it('gives parallel refreshes with one token exactly one winner, the rest 401, never a 500', async () => {
    const first = await tokens();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        fetch(`${server.url}/oauth/token/refresh`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ refresh_token: first.refresh_token, client_id: flow.app.client_id, n: i }),
        }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 401, 401, 401, 401, 401]);
    // The losers were reuse, so the family is revoked, the winner's new token included.
    const winner = (await results.find((r) => r.status === 200)!.json()) as { refresh_token: string };
    expect((await jsonRefresh(winner.refresh_token)).statusCode).toBe(401);
  });

  it('answers unknown, malformed and foreign tokens with 401 and changes nothing', async () => {
    const mine = await tokens();
    for (const token of ['art_' + 'A'.repeat(43), 'nope', mine.access_token, 'x'.repeat(10_000)]) {
      const res = await jsonRefresh(token);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_grant');
    }
    const other = await server.atrium.services.oauth.clients.create({
      name: 'Other',
      redirectUris: [REDIRECT],
    });
    const foreign = await jsonRefresh(mine.refresh_token, other.client_id);
    expect(foreign.statusCode).toBe(401);
    // The rightful client can still use it: a stranger cannot burn someone else's family.
    expect((await jsonRefresh(mine.refresh_token)).statusCode).toBe(200);
  });

  it('answers bad JSON bodies with 400 invalid_request and an unknown client with 401 invalid_client', async () => {
    const mine = await tokens();
    for (const payload of [
      {},
      { refresh_token: mine.refresh_token },
      { refresh_token: 5, client_id: flow.app.client_id },
    ]) {
      const res = await server.atrium.http!.inject({ method: 'POST', url: '/oauth/token/refresh', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
    const broken = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      headers: { 'content-type': 'application/json' },
      payload: '{"refresh_token":',
    });
    expect(broken.statusCode).toBe(400);
    const unknown = await jsonRefresh(mine.refresh_token, 'cli_nobody');
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().error).toBe('invalid_client');
  });

  it('requires a confidential client to authenticate on the standard grant', async () => {
    const mine = await tokens();
    const res = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: form({
        grant_type: 'refresh_token',
        refresh_token: mine.refresh_token,
        client_id: flow.app.client_id,
      }),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it('narrows the scope on request and refuses a wider one without rotating', async () => {
    const mine = await tokens();
    const wider = await grantRefresh(mine.refresh_token, { scope: 'profile:read users:write' });
    expect(wider.statusCode).toBe(400);
    expect(wider.json().error).toBe('invalid_scope');
    const narrow = await grantRefresh(mine.refresh_token, { scope: 'profile:read' });
    expect(narrow.statusCode).toBe(200);
    expect(narrow.json().scope).toBe('profile:read');
    // The family keeps its original grant.
    const again = await grantRefresh(narrow.json().refresh_token);
    expect(again.json().scope).toBe('profile:read data:export');
  });

  it('expires refresh tokens after 30 days and revokes their family', async () => {
    const mine = await tokens();
    const next = (await jsonRefresh(mine.refresh_token)).json();
    clock.offsetMs = 30 * 24 * 3600 * 1000 + 1000;
    try {
      const stale = await jsonRefresh(next.refresh_token);
      expect(stale.statusCode).toBe(401);
      const expiredAccess = await profile(next.access_token);
      expect(expiredAccess.statusCode).toBe(401);
      expect(expiredAccess.json().error).toBe('token_expired');
    } finally {
      clock.offsetMs = 0;
    }
    expect((await jsonRefresh(next.refresh_token)).statusCode).toBe(401);
  });
});
