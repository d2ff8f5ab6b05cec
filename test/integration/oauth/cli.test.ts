import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { runCli, type CliResult } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';

function json(result: CliResult) {
  expect(result.code, result.stderr).toBe(0);
  const lines = result.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

// Each test starts several CLI processes in a row, and each start takes seconds on a loaded 2-core
// CI machine (14 s for a test measured alone): the suite-wide 20 s is too tight for them.
describe('token-server commands of the atrium CLI', { timeout: 90_000 }, () => {
  let dir: string;
  let db: TestDatabase;
  let env: Record<string, string>;
  let userId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-oauth-cli-'));
    db = await freshDatabase();
    env = { DATABASE_URL: db.dialect === 'sqlite' ? `sqlite:${join(dir, 'atrium.db')}` : db.url };
    userId = json(
      await runCli(['users', 'create', '--handle', 'ops-user', '--email', 'ops@example.com'], env),
    ).id;
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  });

  it('clients create prints the client once with its secret, and a public client without one', async () => {
    const confidential = json(
      await runCli(
        [
          'clients',
          'create',
          '--name',
          'Dashboard',
          '--redirect-uri',
          'https://dash.example.com/cb',
          '--redirect-uri',
          'http://127.0.0.1:5173/cb',
          '--scopes',
          'profile:read data:export',
          '--user',
          userId,
        ],
        env,
      ),
    );
    expect(Object.keys(confidential).sort()).toEqual([
      'client_id',
      'client_secret',
      'redirect_uris',
      'scopes',
    ]);
    expect(confidential.client_id).toMatch(/^cli_/);
    expect(confidential.client_secret).toMatch(/^acs_[A-Za-z0-9_-]{43}$/);
    expect(confidential.redirect_uris).toEqual(['https://dash.example.com/cb', 'http://127.0.0.1:5173/cb']);
    expect(confidential.scopes).toEqual(['profile:read', 'data:export']);

    const pub = json(
      await runCli(
        ['clients', 'create', '--name', 'CLI app', '--public', '--redirect-uri', 'com.example.app:/cb'],
        env,
      ),
    );
    expect(pub.client_secret).toBeNull();
    expect(pub.scopes.length).toBe(8);
  });

  it('clients create refuses unsafe redirect URIs and unknown scopes with exit 1', async () => {
    for (const args of [
      ['--redirect-uri', 'javascript:alert(1)'],
      ['--redirect-uri', 'https://a.example/cb#frag'],
      ['--redirect-uri', 'https://user@a.example/cb'],
      ['--redirect-uri', '/relative'],
      ['--scopes', 'profile:read root'],
    ]) {
      const res = await runCli(['clients', 'create', '--name', 'Bad', ...args], env);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
      expect(JSON.parse(res.stderr.trim()).error).toBe('validation_error');
    }
    expect((await runCli(['clients', 'create'], env)).code).toBe(2);
  });

  it('tokens issue prints working tokens bound to a client, within the role and the client', async () => {
    const issued = json(
      await runCli(['tokens', 'issue', '--user', userId, '--scopes', 'profile:read orders:read'], env),
    );
    expect(issued.expires_in).toBe(900);
    expect(issued.refresh_token).toMatch(/^art_/);
    expect(issued.client_id).toMatch(/^cli_/);

    const services = await createServices(parseConfig({ NODE_ENV: 'test', ...env }));
    try {
      const active = await services.oauth.introspector.inspect(issued.access_token);
      expect(active.claims).toMatchObject({
        sub: userId,
        scope: ['profile:read', 'orders:read'],
        client_id: issued.client_id,
      });
      const rotated = await services.oauth.refresh.rotate(issued.refresh_token, issued.client_id);
      expect(rotated.subject).toBe(userId);
    } finally {
      await closeServices(services);
    }

    // The same operator client every time, not one per command.
    const again = json(await runCli(['tokens', 'issue', '--user', userId, '--scopes', 'profile:read'], env));
    expect(again.client_id).toBe(issued.client_id);

    const client = json(
      await runCli(['clients', 'create', '--name', 'Narrow', '--scopes', 'profile:read'], env),
    );
    const withClient = json(
      await runCli(
        ['tokens', 'issue', '--user', userId, '--scopes', 'profile:read', '--client', client.client_id],
        env,
      ),
    );
    expect(withClient.client_id).toBe(client.client_id);
    const beyond = await runCli(
      ['tokens', 'issue', '--user', userId, '--scopes', 'data:export', '--client', client.client_id],
      env,
    );
    expect(beyond.code).toBe(1);
  });

  it('tokens issue refuses unknown users, unknown scopes and scopes beyond the role', async () => {
    const viewer = json(
      await runCli(
        ['users', 'create', '--handle', 'just-looking', '--email', 'look@example.com', '--role', 'viewer'],
        env,
      ),
    );
    const cases = [
      ['--user', 'usr_nobody', '--scopes', 'profile:read'],
      ['--user', userId, '--scopes', 'profile:read everything'],
      ['--user', viewer.id, '--scopes', 'orders:write'],
    ];
    for (const args of cases) {
      const res = await runCli(['tokens', 'issue', ...args], env);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
    }
    expect((await runCli(['tokens', 'issue', '--user', userId], env)).code).toBe(2);
  });
});
