import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  forge,
  hmacSigner,
  privateKeyFromJwk,
  publicPemFromJwk,
  rsaSigner,
  strangerKey,
  unsigned,
  type Signer,
  withAlteredSignature,
} from './forge.js';
import { accessClaims, codeFlowSuite, codeFlowTokens, userWithPassword } from './support.js';

describe('bearer tokens: every forged, altered or misused token is refused with 401, never a 500', () => {
  const { server, flow } = codeFlowSuite();
  let kid: string;
  let realKey: Signer;
  let realKeySha512: Signer;
  let publicPem: string;
  let publicJwkJson: string;

  beforeAll(async () => {
    const { services } = server.atrium;
    await services.oauth.signingKeys!.signingKey();
    const row = await services.store.db.selectFrom('signing_keys').selectAll().executeTakeFirstOrThrow();
    kid = row.kid;
    const privateKey = privateKeyFromJwk(row.private_jwk);
    realKey = rsaSigner(privateKey);
    realKeySha512 = rsaSigner(privateKey, 'RSA-SHA512');
    publicPem = publicPemFromJwk(row.public_jwk);
    publicJwkJson = row.public_jwk;
  });

  const now = () => Math.floor(Date.now() / 1000);
  const header = (extra: Record<string, unknown> = {}) => ({ alg: 'RS256', typ: 'at+jwt', kid, ...extra });
  const claims = (extra: Record<string, unknown> = {}) => accessClaims(server, flow, extra);
  const call = (authorization: string) =>
    server.atrium.http!.inject({ method: 'GET', url: '/api/user/profile', headers: { authorization } });

  async function expectRefused(token: string, error: 'invalid_token' | 'token_expired' = 'invalid_token') {
    const res = await call(`Bearer ${token}`);
    expect(res.statusCode, `${res.body} for ${token.slice(0, 80)}`).toBe(401);
    expect(res.json().error).toBe(error);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    return res;
  }

  it('accepts a correctly made token (the forging helper itself is sound)', async () => {
    const res = await call(`Bearer ${forge(header(), claims(), realKey)}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().user_id).toBe(flow.user.id);
  });

  it('refuses alg none, with or without a signature', async () => {
    await expectRefused(forge(header({ alg: 'none' }), claims(), unsigned));
    await expectRefused(forge(header({ alg: 'none' }), claims(), realKey));
    await expectRefused(forge(header({ alg: 'NONE' }), claims(), unsigned));
    await expectRefused(forge({ alg: 'none' }, claims(), unsigned));
  });

  it('refuses HS256 signed with the RSA public key (algorithm confusion)', async () => {
    await expectRefused(forge(header({ alg: 'HS256' }), claims(), hmacSigner(publicPem)));
    await expectRefused(forge(header({ alg: 'HS256' }), claims(), hmacSigner(publicJwkJson)));
    await expectRefused(forge(header({ alg: 'HS256', kid: undefined }), claims(), hmacSigner(publicPem)));
  });

  it('refuses other algorithms even when signed with the real key', async () => {
    await expectRefused(forge(header({ alg: 'RS512' }), claims(), realKeySha512));
    await expectRefused(forge(header({ alg: 'PS256' }), claims(), realKey));
    await expectRefused(forge(header({ alg: 'ES256' }), claims(), realKey));
  });

  it('refuses unknown, missing and injected kids', async () => {
    for (const badKid of [
      'unknown-kid',
      '../../../../../dev/null',
      "' OR '1'='1",
      "x'; DROP TABLE signing_keys; --",
      '',
      'a'.repeat(500),
      42,
      null,
      { $ne: null },
    ]) {
      await expectRefused(forge(header({ kid: badKid }), claims(), realKey));
    }
    await expectRefused(forge({ alg: 'RS256', typ: 'at+jwt' }, claims(), realKey));
    const keys = await server.atrium.services.store.db.selectFrom('signing_keys').select('kid').execute();
    expect(keys.length).toBeGreaterThan(0);
  });

  it('refuses a token signed by another key under our kid', async () => {
    await expectRefused(forge(header(), claims(), rsaSigner(strangerKey().privateKey)));
  });

  it('refuses jku, x5u, x5c, embedded jwk and crit headers even with a valid signature', async () => {
    const stranger = strangerKey();
    await expectRefused(forge(header({ jku: 'https://evil.example/jwks.json' }), claims(), realKey));
    await expectRefused(forge(header({ x5u: 'https://evil.example/cert.pem' }), claims(), realKey));
    await expectRefused(forge(header({ x5c: ['MIIB'] }), claims(), realKey));
    await expectRefused(forge(header({ jwk: stranger.publicJwk }), claims(), rsaSigner(stranger.privateKey)));
    await expectRefused(forge(header({ jwk: stranger.publicJwk }), claims(), realKey));
    await expectRefused(forge(header({ crit: ['exp'] }), claims(), realKey));
    await expectRefused(forge(header({ crit: ['b64'], b64: false }), claims(), realKey));
  });

  it('refuses a tampered payload or header', async () => {
    const real = forge(header(), claims(), realKey);
    const [h, , s] = real.split('.');
    const widened = Buffer.from(
      JSON.stringify(claims({ scope: 'profile:read data:export users:write' })),
    ).toString('base64url');
    await expectRefused(`${h}.${widened}.${s}`);
    const otherHeader = Buffer.from(JSON.stringify(header({ typ: 'JWT' }))).toString('base64url');
    await expectRefused(`${otherHeader}.${real.split('.')[1]}.${s}`);
    await expectRefused(withAlteredSignature(real));
  });

  it('answers an expired token with token_expired and a future nbf with invalid_token', async () => {
    await expectRefused(
      forge(header(), claims({ iat: now() - 960, exp: now() - 60 }), realKey),
      'token_expired',
    );
    await expectRefused(forge(header(), claims({ nbf: now() + 300 }), realKey));
    await expectRefused(forge(header(), claims({ iat: now() + 600, exp: now() + 1500 }), realKey));
  });

  it('refuses a token living longer than any we issue, or missing required claims', async () => {
    await expectRefused(forge(header(), claims({ exp: now() + 86_400 }), realKey));
    for (const missing of ['exp', 'iat', 'sub', 'jti', 'iss', 'aud']) {
      const c = claims();
      delete (c as Record<string, unknown>)[missing];
      await expectRefused(forge(header(), c, realKey));
    }
  });

  it('refuses a wrong issuer or audience', async () => {
    await expectRefused(forge(header(), claims({ iss: 'https://evil.example' }), realKey));
    await expectRefused(forge(header(), claims({ iss: `${server.url}/` }), realKey));
    await expectRefused(forge(header(), claims({ aud: 'https://other-api.example' }), realKey));
    await expectRefused(forge(header(), claims({ aud: ['https://other-api.example'] }), realKey));
  });

  it('refuses tokens whose type is not access, or whose typ is not at+jwt', async () => {
    await expectRefused(forge(header(), claims({ type: 'refresh' }), realKey));
    await expectRefused(forge(header(), claims({ type: undefined }), realKey));
    await expectRefused(forge(header(), claims({ type: ['access'] }), realKey));
    await expectRefused(forge(header({ typ: 'JWT' }), claims(), realKey));
    await expectRefused(forge(header({ typ: undefined }), claims(), realKey));
  });

  it('refuses scope as a list (RFC 9068: a space-delimited string) or of the wrong type', async () => {
    await expectRefused(forge(header(), claims({ scope: ['profile:read'] }), realKey));
    await expectRefused(forge(header(), claims({ scope: ['profile:read data:export'] }), realKey));
    await expectRefused(forge(header(), claims({ scope: { 'profile:read': true } }), realKey));
    await expectRefused(forge(header(), claims({ scope: 5 }), realKey));
  });

  it('refuses oversized and malformed tokens and headers', async () => {
    const big = forge(header(), claims({ padding: 'x'.repeat(9000) }), realKey);
    await expectRefused(big);
    const huge = await server.atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { authorization: `Bearer ${'a'.repeat(20_000)}.b.c` },
    });
    expect(huge.statusCode).toBe(401);
    // Over a real socket a header this large never reaches the application: 431, not a 500.
    const overSocket = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${'a'.repeat(20_000)}.b.c` },
    });
    expect(overSocket.status).toBe(431);
    for (const token of [
      'a.b',
      'a.b.c.d',
      '..',
      'a..c',
      'not-a-token',
      '%%%.%%%.%%%',
      'eyJ.eyJ.',
      '\u00e9.\u00e9.\u00e9',
    ]) {
      await expectRefused(token);
    }
    for (const authorization of ['Bearer', 'Bearer ', 'Basic abc', 'Bearer a b', 'Token abc']) {
      const res = await call(authorization);
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    }
  });

  it('refuses refresh tokens and unknown opaque tokens as access tokens', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const res = await expectRefused(tokens.refresh_token);
    expect(res.json().message).toMatch(/refresh token/);
    await expectRefused('art_' + 'A'.repeat(43));
    await expectRefused('opaque-token-that-nobody-issued');
    await expectRefused('atr_live_00000000000000000000000000000000_000000');
  });

  it('refuses a token whose user has been deleted', async () => {
    const doomed = await userWithPassword(server.atrium);
    const token = forge(header(), claims({ sub: doomed.id }), realKey);
    expect((await call(`Bearer ${token}`)).statusCode).toBe(200);
    await server.atrium.services.core.users.delete(SYSTEM_ACTOR, doomed.id);
    await expectRefused(token);
  });

  it('refuses a token issued to a client acting for itself once the client is revoked', async () => {
    const clients = server.atrium.services.oauth.clients;
    const machine = await clients.create({ name: 'Machine' });
    const token = forge(header(), claims({ sub: machine.client_id, client_id: machine.client_id }), realKey);
    expect((await call(`Bearer ${token}`)).statusCode).toBe(200);
    await clients.revoke(machine.client_id);
    await expectRefused(token);
  });
});
