import { SignJWT, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { forge, hmacSigner, unsigned } from './forge.js';
import { basic, firstPartyApp, form, HS256_ENV, oauthServerForSuite, REDIRECT } from './support.js';

/**
 * Another service holding the same JWT_SECRET issues access tokens with exactly the spec's claims
 * (sub, scope, iat, exp, type: access, iss, aud) and the plain header jose or any JWT library
 * writes: `{"alg":"HS256","typ":"JWT"}`. Atrium's bearer check, over a real socket, must take them;
 * everything RFC 8725 warns about must still be refused.
 */
describe('HS256 tokens from a foreign issuer sharing JWT_SECRET', () => {
  const server = oauthServerForSuite(HS256_ENV);
  let userId: string;
  let client: { client_id: string; client_secret: string };
  const secret = new TextEncoder().encode(HS256_ENV.JWT_SECRET);
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    userId = (await server.atrium.caller({ role: 'member' })).userId;
    client = await firstPartyApp(server, REDIRECT);
  });

  /** The spec's claims and nothing else. */
  const claims = (extra: Record<string, unknown> = {}): JWTPayload => ({
    iss: server.url,
    aud: server.url,
    sub: userId,
    scope: 'profile:read',
    type: 'access',
    iat: now(),
    exp: now() + 900,
    ...extra,
  });

  /** What the foreign issuer does: jose, the shared secret, the header it asks for. */
  const foreign = (
    header: JWTHeaderParameters = { alg: 'HS256', typ: 'JWT' },
    payload: JWTPayload = claims(),
    key: Uint8Array = secret,
  ) => new SignJWT(payload).setProtectedHeader(header).sign(key);

  const profile = (token: string) =>
    fetch(`${server.url}/api/user/profile`, { headers: { authorization: `Bearer ${token}` } });

  async function expectRefused(token: string, error = 'invalid_token'): Promise<void> {
    const res = await profile(token);
    expect(res.status, token).toBe(401);
    expect(((await res.json()) as { error: string }).error).toBe(error);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer error="/);
  }

  it('accepts a foreign token with a plain JWT header, or with no typ at all', async () => {
    for (const header of [
      { alg: 'HS256', typ: 'JWT' },
      { alg: 'HS256', typ: 'jwt' },
      { alg: 'HS256', typ: 'application/jwt' },
      { alg: 'HS256' },
      { alg: 'HS256', typ: 'at+jwt' },
    ]) {
      const res = await profile(await foreign(header));
      expect(res.status, JSON.stringify(header)).toBe(200);
      expect(await res.json()).toMatchObject({ user_id: userId, scopes: ['profile:read'] });
    }
  });

  it('reports a foreign token as active at the introspection endpoint', async () => {
    const res = await fetch(`${server.url}/oauth/introspect`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(client.client_id, client.client_secret),
      },
      body: form({ token: await foreign() }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ active: true, sub: userId, scope: 'profile:read', iss: server.url });
    expect(body.jti).toBeUndefined();
  });

  it('keeps at+jwt and a jti on the tokens Atrium itself issues', async () => {
    const issued = await server.atrium.services.oauth.tokens.issue({
      subject: userId,
      clientId: client.client_id,
      scope: ['profile:read'],
    });
    const header = JSON.parse(Buffer.from(issued.token.split('.')[0]!, 'base64url').toString()) as unknown;
    expect(header).toEqual({ alg: 'HS256', typ: 'at+jwt' });
    expect(issued.claims.jti).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('refuses any other explicit type, whatever the claims say', async () => {
    for (const typ of [
      'JOSE',
      'dpop+jwt',
      'authz-ticket+jwt',
      'secevent+jwt',
      'logout+jwt',
      'at+jwt+x',
      '',
    ]) {
      await expectRefused(await foreign({ alg: 'HS256', typ }));
    }
  });

  it('refuses a token whose type claim is not access, or that has none', async () => {
    await expectRefused(await foreign(undefined, claims({ type: 'refresh' })));
    await expectRefused(await foreign(undefined, claims({ type: 'id' })));
    await expectRefused(await foreign(undefined, claims({ type: 'ACCESS' })));
    const { type: _omitted, ...withoutType } = claims();
    await expectRefused(await foreign(undefined, withoutType));
  });

  it('refuses every RFC 8725 case: other algorithms, none, the wrong key, header injection', async () => {
    const hs = hmacSigner(HS256_ENV.JWT_SECRET);
    await expectRefused(forge({ alg: 'none', typ: 'JWT' }, claims(), unsigned));
    await expectRefused(forge({ alg: 'none' }, claims(), unsigned));
    await expectRefused(forge({ alg: 'hs256', typ: 'JWT' }, claims(), hs));
    await expectRefused(await foreign({ alg: 'HS384', typ: 'JWT' }));
    await expectRefused(await foreign({ alg: 'HS512', typ: 'JWT' }));
    await expectRefused(await foreign(undefined, claims(), new TextEncoder().encode('x'.repeat(40))));
    await expectRefused(await foreign({ alg: 'HS256', typ: 'JWT', kid: '../../etc/passwd' }));
    await expectRefused(await foreign({ alg: 'HS256', typ: 'JWT', jku: 'https://evil.example/jwks' }));
    await expectRefused(await foreign({ alg: 'HS256', typ: 'JWT', x5u: 'https://evil.example/cert' }));
    // jose will not sign an unknown critical header; the attacker's hand-made token does.
    await expectRefused(forge({ alg: 'HS256', typ: 'JWT', crit: ['exp'], exp: 1 }, claims(), hs));
    await expectRefused(forge({ alg: 'HS256', typ: 'JWT', b64: false, crit: ['b64'] }, claims(), hs));
    // A signature stripped off, or the token cut to two parts.
    const good = await foreign();
    await expectRefused(good.split('.').slice(0, 2).join('.') + '.');
    await expectRefused(good.split('.').slice(0, 2).join('.'));
  });

  it('refuses wrong claims: issuer, audience, lifetimes, missing claims, a scope list', async () => {
    await expectRefused(await foreign(undefined, claims({ iss: 'https://evil.example' })));
    await expectRefused(await foreign(undefined, claims({ aud: 'https://other-api.example' })));
    await expectRefused(await foreign(undefined, claims({ nbf: now() + 600 })));
    await expectRefused(await foreign(undefined, claims({ iat: now() + 600, exp: now() + 900 })));
    await expectRefused(await foreign(undefined, claims({ exp: now() + 3600 })));
    await expectRefused(await foreign(undefined, claims({ scope: ['profile:read'] })));
    await expectRefused(await foreign(undefined, claims({ sub: 'usr_00000000000000000000000000' })));
    await expectRefused(await foreign(undefined, claims({ jti: 42 })));
    for (const missing of ['sub', 'iat', 'exp', 'iss', 'aud'] as const) {
      const { [missing]: _gone, ...rest } = claims();
      await expectRefused(await foreign(undefined, rest));
    }
    await expectRefused(
      await foreign(undefined, claims({ iat: now() - 2000, exp: now() - 1100 })),
      'token_expired',
    );
  });
});
