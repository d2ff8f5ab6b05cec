import { jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { forge, hmacSigner, rsaSigner, strangerKey, unsigned } from './forge.js';
import { accessClaims, basic, codeFlowSuite, codeFlowTokens, form, HS256_ENV } from './support.js';

describe('the symmetric variant (TOKEN_SIGNING=hs256)', () => {
  const { server, flow } = codeFlowSuite(HS256_ENV);
  const secret = new TextEncoder().encode(HS256_ENV.JWT_SECRET);

  const now = () => Math.floor(Date.now() / 1000);
  const claims = (extra: Record<string, unknown> = {}) => accessClaims(server, flow, { jti: 'j1', ...extra });
  const profile = (token: string) =>
    server.atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { authorization: `Bearer ${token}` },
    });

  it('issues HS256 access tokens (15 minutes) and 30-day refresh tokens through the same flows', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const { payload, protectedHeader } = await jwtVerify(tokens.access_token, secret, {
      algorithms: ['HS256'],
      issuer: server.url,
      audience: server.url,
    });
    expect(protectedHeader).toEqual({ alg: 'HS256', typ: 'at+jwt' });
    expect(payload).toMatchObject({ sub: flow.user.id, type: 'access', scope: 'profile:read data:export' });
    expect(payload.exp! - payload.iat!).toBe(900);
    expect((await profile(tokens.access_token)).statusCode).toBe(200);

    const family = await server.atrium.services.store.db
      .selectFrom('refresh_tokens')
      .select(['expires_at', 'created_at'])
      .executeTakeFirstOrThrow();
    expect(Date.parse(family.expires_at) - Date.parse(family.created_at)).toBe(30 * 24 * 3600 * 1000);

    const refreshed = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token: tokens.refresh_token, client_id: flow.app.client_id },
    });
    expect(refreshed.statusCode).toBe(200);
    expect(refreshed.json().expires_in).toBe(900);

    const cc = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(flow.app.client_id, flow.app.client_secret),
      },
      payload: form({ grant_type: 'client_credentials', scope: 'data:export' }),
    });
    expect(cc.statusCode).toBe(200);
    const exported = await server.atrium.http!.inject({
      method: 'POST',
      url: '/api/data/export',
      headers: { authorization: `Bearer ${cc.json().access_token}` },
    });
    expect(exported.statusCode).toBe(202);
  });

  it('publishes no keys: an empty JWKS and no jwks_uri in the metadata', async () => {
    const jwks = await server.atrium.http!.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    expect(jwks.json()).toEqual({ keys: [] });
    const metadata = await server.atrium.http!.inject({
      method: 'GET',
      url: '/.well-known/oauth-authorization-server',
    });
    expect(metadata.json().jwks_uri).toBeUndefined();
    expect(metadata.json().issuer).toBe(server.url);
  });

  it('accepts a token made with the secret and refuses every variation', async () => {
    const hs = hmacSigner(HS256_ENV.JWT_SECRET);
    expect((await profile(forge({ alg: 'HS256', typ: 'at+jwt' }, claims(), hs))).statusCode).toBe(200);
    const refused = [
      forge({ alg: 'none', typ: 'at+jwt' }, claims(), unsigned),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims(), hmacSigner('another-secret-of-at-least-32-bytes!!')),
      forge({ alg: 'HS512', typ: 'at+jwt' }, claims(), hmacSigner(HS256_ENV.JWT_SECRET, 'sha512')),
      forge({ alg: 'RS256', typ: 'at+jwt', kid: 'k' }, claims(), rsaSigner(strangerKey().privateKey)),
      forge({ alg: 'HS256', typ: 'at+jwt', kid: 'injected' }, claims(), hs),
      forge({ alg: 'HS256', typ: 'at+jwt', jku: 'https://evil.example/jwks' }, claims(), hs),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ type: 'refresh' }), hs),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ scope: ['profile:read'] }), hs),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ iss: 'https://evil.example' }), hs),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ aud: 'https://evil.example' }), hs),
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ nbf: now() + 600 }), hs),
    ];
    for (const token of refused) {
      const res = await profile(token);
      expect(res.statusCode, token).toBe(401);
      expect(res.json().error).toBe('invalid_token');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    }
    const expired = await profile(
      forge({ alg: 'HS256', typ: 'at+jwt' }, claims({ iat: now() - 1000, exp: now() - 100 }), hs),
    );
    expect(expired.statusCode).toBe(401);
    expect(expired.json().error).toBe('token_expired');
  });
});
