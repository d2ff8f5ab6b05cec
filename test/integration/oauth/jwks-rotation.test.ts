import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { ACTIVATION_DELAY_SECONDS, JWKS_MAX_AGE_SECONDS } from '../../../src/oauth/keys.js';
import { runCli } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { startOAuthServer, type OAuthTestServer } from './support.js';

/** Every instance in a test shares this clock, as real instances share the wall clock. */
const clock = {
  offsetMs: 0,
  now() {
    return new Date(Date.now() + this.offsetMs);
  },
};
const MINUTE = 60_000;

function jwksOf(server: OAuthTestServer) {
  return server.atrium.http!.inject({ method: 'GET', url: '/.well-known/jwks.json' });
}

describe('JWKS and signing-key rotation', () => {
  let server: OAuthTestServer;
  beforeAll(async () => {
    server = await startOAuthServer({}, clock);
  });
  afterAll(async () => {
    await server.stop();
  });
  afterEach(() => {
    clock.offsetMs = 0;
  });

  const issue = async () =>
    server.atrium.services.oauth.tokens.issue({
      subject: 'usr_x',
      clientId: 'cli_x',
      scope: ['profile:read'],
    });
  const kidOf = (token: string) => decodeProtectedHeader(token).kid;

  it('publishes public members only, cacheable for an hour', async () => {
    const res = await jwksOf(server);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=3600'); // the spec's one hour
    expect(res.headers['content-type']).toMatch(/^application\/jwk-set\+json/);
    const { keys } = res.json();
    expect(keys.length).toBeGreaterThanOrEqual(1);
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
      expect(key).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    }
    for (const secret of ['"d"', '"p"', '"q"', '"dp"', '"dq"', '"qi"'])
      expect(res.body).not.toContain(secret);
  });

  it('signs with the first key of an empty store at once, and tokens verify against the JWKS', async () => {
    const { token } = await issue();
    const jwks = createLocalJWKSet((await jwksOf(server)).json());
    const { payload, protectedHeader } = await jwtVerify(token, jwks, {
      issuer: server.url,
      audience: server.url,
      currentDate: clock.now(),
    });
    expect(protectedHeader).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    expect(payload.type).toBe('access');
  });

  it('publishes a rotated key a JWKS max-age before it signs, and keeps the old one until its tokens expire', async () => {
    const oldKid = kidOf((await issue()).token);
    const rotated = await server.atrium.services.oauth.signingKeys!.rotate();
    const activeAt = Date.parse(rotated.active_from);
    expect(activeAt - Date.parse(rotated.published_at)).toBeGreaterThanOrEqual(JWKS_MAX_AGE_SECONDS * 1000);
    expect(activeAt - Date.parse(rotated.published_at)).toBe(ACTIVATION_DELAY_SECONDS * 1000);

    // Published at once, not used yet.
    const kids = () => jwksOf(server).then((r) => r.json().keys.map((k: { kid: string }) => k.kid));
    expect(await kids()).toEqual(expect.arrayContaining([oldKid, rotated.kid]));
    expect(kidOf((await issue()).token)).toBe(oldKid);

    // A minute before activation the old key still signs.
    clock.offsetMs = activeAt - Date.now() - MINUTE;
    const lastOld = await issue();
    expect(kidOf(lastOld.token)).toBe(oldKid);

    // From activation the new key signs; the old key's last token still verifies.
    clock.offsetMs = activeAt - Date.now() + 1000;
    const first = await issue();
    expect(kidOf(first.token)).toBe(rotated.kid);
    expect(await kids()).toEqual(expect.arrayContaining([oldKid, rotated.kid]));
    const verifier = server.atrium.services.oauth.tokens;
    await expect(verifier.verify(lastOld.token)).resolves.toMatchObject({ sub: 'usr_x' });

    // Once every token the old key signed has expired, the old key leaves the JWKS.
    clock.offsetMs = activeAt - Date.now() + 21 * MINUTE;
    expect(await kids()).not.toContain(oldKid);
    expect(await kids()).toContain(rotated.kid);
  });
});

describe('several instances on one store', () => {
  let dir: string;
  let database: TestDatabase;
  let a: Services;
  let b: Services;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-keys-'));
    database = await freshDatabase();
    const url = database.dialect === 'sqlite' ? `sqlite:${join(dir, 'keys.db')}` : database.url;
    const config = parseConfig({ NODE_ENV: 'test', DATABASE_URL: url, PORT: '0' });
    a = await createServices(config, { clock });
    b = await createServices(config, { clock });
  });
  afterAll(async () => {
    clock.offsetMs = 0;
    await closeServices(a);
    await closeServices(b);
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('agree on the first key even when both make it at once', async () => {
    const [ka, kb] = await Promise.all([
      a.oauth.signingKeys!.signingKey(),
      b.oauth.signingKeys!.signingKey(),
    ]);
    expect(ka.kid).toBe(kb.kid);
    const rows = await a.store.db.selectFrom('signing_keys').select('kid').execute();
    expect(rows).toHaveLength(1);
  });

  it('verify each other tokens, and a key rotated by one is used and accepted by the other', async () => {
    const fromA = await a.oauth.tokens.issue({
      subject: 'usr_a',
      clientId: 'cli_a',
      scope: ['profile:read'],
    });
    await expect(b.oauth.tokens.verify(fromA.token)).resolves.toMatchObject({ sub: 'usr_a' });

    const rotated = await a.oauth.signingKeys!.rotate();
    clock.offsetMs = Date.parse(rotated.active_from) - Date.now() + 1000;
    const fromNewKey = await a.oauth.tokens.issue({
      subject: 'usr_a',
      clientId: 'cli_a',
      scope: ['profile:read'],
    });
    expect(decodeProtectedHeader(fromNewKey.token).kid).toBe(rotated.kid);
    // B has not seen the new kid yet: it re-reads the store instead of refusing the token.
    await expect(b.oauth.tokens.verify(fromNewKey.token)).resolves.toMatchObject({ sub: 'usr_a' });
    const jwks = await b.oauth.jwks();
    expect(jwks.keys.map((k) => k.kid)).toContain(rotated.kid);
  });
});

describe('atrium signing-keys rotate', () => {
  let dir: string;
  let database: TestDatabase;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-rotate-'));
    database = await freshDatabase();
    env = { DATABASE_URL: database.dialect === 'sqlite' ? `sqlite:${join(dir, 'cli.db')}` : database.url };
  });
  afterAll(async () => {
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints { kid, published_at, active_from }: the first key at once, later keys an hour and more ahead', async () => {
    const first = await runCli(['signing-keys', 'rotate'], env);
    expect(first.code, first.stderr).toBe(0);
    const one = JSON.parse(first.stdout);
    expect(Object.keys(one).sort()).toEqual(['active_from', 'kid', 'published_at']);
    expect(one.active_from).toBe(one.published_at);

    const second = await runCli(['signing-keys', 'rotate'], env);
    expect(second.code, second.stderr).toBe(0);
    const two = JSON.parse(second.stdout);
    expect(two.kid).not.toBe(one.kid);
    expect(Date.parse(two.active_from) - Date.parse(two.published_at)).toBeGreaterThanOrEqual(3600_000);
  });

  it('refuses in the HS256 variant, where there are no keys to rotate', async () => {
    const res = await runCli(['signing-keys', 'rotate'], {
      ...env,
      TOKEN_SIGNING: 'hs256',
      JWT_SECRET: 'a-test-secret-of-at-least-32-bytes!!',
    });
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(JSON.parse(res.stderr.trim()).message).toMatch(/hs256/i);
  });
});
