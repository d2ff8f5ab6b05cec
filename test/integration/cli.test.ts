import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve } from '../helpers/serve.js';
import { runBuiltCli, runCli } from '../helpers/cli.js';
import { ensureBuilt } from '../helpers/build.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/ports.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

/**
 * Makes a file or folder one this process cannot write, in a way that holds for root too: mode
 * 444/555 for another user, the immutable attribute (chattr +i) for root. Returns the undo, or
 * undefined where neither works (root on a file system without the attribute).
 */
function readOnly(path: string, folder: boolean): (() => void) | undefined {
  if (process.getuid?.() !== 0) {
    chmodSync(path, folder ? 0o555 : 0o444);
    return () => chmodSync(path, folder ? 0o755 : 0o644);
  }
  try {
    execFileSync('chattr', ['+i', path], { stdio: 'ignore' });
    return () => execFileSync('chattr', ['-i', path], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
}

/** One JSON object on stdout, exit 0: what every admin command promises (decisions §2). */
function json(result: { code: number | null; stdout: string; stderr: string }) {
  expect(result.code, result.stderr).toBe(0);
  const lines = result.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

// Each test starts one or more CLI processes; a start takes seconds on a loaded 2-core CI machine.
describe('atrium command line', { timeout: 90_000 }, () => {
  let dir: string;
  let db: TestDatabase;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-cli-'));
    db = await freshDatabase();
    const url = db.dialect === 'sqlite' ? `sqlite:${join(dir, 'atrium.db')}` : db.url;
    env = { DATABASE_URL: url };
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  });

  it('migrate applies the migrations once', async () => {
    const first = json(await runCli(['migrate'], env));
    expect(first.applied).toContain('0001_initial');
    const again = json(await runCli(['migrate'], env));
    expect(again.applied).toEqual([]);
  });

  it('creates an organization, a user in it and an API key for the user', async () => {
    const org = json(await runCli(['orgs', 'create', '--name', 'Acme Ltd'], env));
    expect(org).toMatchObject({ name: 'Acme Ltd' });
    expect(org.id).toMatch(/^org_/);

    const user = json(
      await runCli(
        [
          'users',
          'create',
          '--handle',
          'grace',
          '--email',
          'Grace@Example.com',
          '--name',
          'Grace Hopper',
          '--role',
          'admin',
          '--org',
          org.id,
          '--password',
          'correct horse',
        ],
        env,
      ),
    );
    expect(user).toMatchObject({
      name: 'Grace Hopper',
      email: 'grace@example.com',
      role: 'admin',
      organization_id: org.id,
    });
    expect(user.id).toMatch(/^usr_/);
    expect(user._links.self.href).toBe(`/v1/users/${user.id}`);
    expect(JSON.stringify(user)).not.toMatch(/password|scrypt/);

    const key = json(
      await runCli(['api-keys', 'create', '--user', user.id, '--tier', 'growth', '--mode', 'live'], env),
    );
    expect(key).toMatchObject({ tier: 'growth', mode: 'live', user_id: user.id });
    expect(key.key).toMatch(/^atr_live_[0-9a-f]{32}_[0-9a-f]{6}$/);
    expect(key.key.startsWith(key.prefix)).toBe(true);

    const revoked = json(await runCli(['api-keys', 'revoke', key.id], env));
    expect(revoked.id).toBe(key.id);
    expect(Number.isNaN(Date.parse(revoked.revoked_at))).toBe(false);
  });

  // service-interface.md: "Full keys are never logged". A key given where its id belongs was echoed
  // whole in the not-found message.
  it('api-keys revoke given a full key instead of an id shows only its prefix', async () => {
    const user = json(
      await runCli(['users', 'create', '--handle', 'keyholder', '--email', 'keyholder@example.com'], env),
    );
    const key = json(await runCli(['api-keys', 'create', '--user', user.id], env));
    const res = await runCli(['api-keys', 'revoke', key.key], { ...env, LOG_LEVEL: 'debug' });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stdout).toBe('');
    const secretPart = (key.key as string).slice(key.prefix.length);
    expect(res.stderr).not.toContain(secretPart);
    expect(res.stderr).not.toContain(key.key);
    const error = JSON.parse(res.stderr.trim().split('\n').at(-1)!) as { error: string; message: string };
    expect(error).toEqual({
      error: 'not_found',
      message: `API key not found: the value given looks like an API key (${key.prefix}...), not an id (an API key id starts with key_).`,
    });
    // The id is what revokes it.
    expect(json(await runCli(['api-keys', 'revoke', key.id], env)).id).toBe(key.id);
  });

  // Five CLI runs, each a fresh Node process: more time than the default on a shared, loaded machine.
  it('soft-deletes a user: one JSON object, the user gone, its key refused; unknown ids exit 1', async () => {
    const user = json(
      await runCli(['users', 'create', '--handle', 'leaving', '--email', 'leaving@example.com'], env),
    );
    const deleted = json(await runCli(['users', 'delete', user.id], env));
    expect(Object.keys(deleted).sort()).toEqual(['deleted_at', 'id']);
    expect(deleted.id).toBe(user.id);
    expect(Number.isNaN(Date.parse(deleted.deleted_at))).toBe(false);

    const again = await runCli(['users', 'delete', user.id], env);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(JSON.parse(again.stderr.trim())).toMatchObject({ error: 'not_found' });
    const key = await runCli(['api-keys', 'create', '--user', user.id], env);
    expect(key.code).toBe(1);
    expect(JSON.parse(key.stderr.trim())).toMatchObject({ error: 'not_found' });
    const usage = await runCli(['users', 'delete'], env);
    expect(usage.code).toBe(2);
    expect(usage.stdout).toBe('');
  }, 120_000);

  // Ten CLI runs, each a fresh Node process: the built CLI, which starts in a fraction of tsx's time.
  it('words an unknown user alike in every command that takes a user id', async () => {
    ensureBuilt();
    // A well-formed id is echoed; a string that cannot be a user id is not (the core's userNotFound).
    const unknown = 'usr_00000000000000000000000000';
    const cases: Array<[string, string]> = [
      ['nope', 'User not found.'],
      [unknown, `User ${unknown} not found.`],
    ];
    // A literal public address: the URL passes its check without DNS, so the user is what fails.
    const commands = (id: string): string[][] => [
      ['users', 'delete', id],
      ['api-keys', 'create', '--user', id],
      ['tokens', 'issue', '--user', id, '--scopes', 'users:read'],
      ['clients', 'create', '--name', 'Lost', '--user', id],
      ['webhooks', 'create', '--url', 'https://93.184.216.34/hook', '--user', id],
    ];
    for (const [id, message] of cases) {
      for (const args of commands(id)) {
        const res = await runBuiltCli(args, env);
        expect(res.code, args.join(' ')).toBe(1);
        expect(res.stdout).toBe('');
        const error = JSON.parse(res.stderr.trim());
        expect(error.message, args.join(' ')).toBe(message);
        // webhooks create names the user in a field of the request, as users create does an
        // organization: 422 on user_id; the others act on the user, which is not found.
        if (args[0] === 'webhooks') {
          expect(error).toMatchObject({ error: 'unprocessable', details: [{ field: 'user_id', message }] });
        } else {
          expect(error.error).toBe('not_found');
        }
      }
    }
  }, 180_000);

  it('creates a product', async () => {
    const p = json(await runCli(['products', 'create', '--name', 'Teapot', '--price-cents', '1999'], env));
    expect(p).toMatchObject({ name: 'Teapot', price_cents: 1999 });
    expect(p.id).toMatch(/^prd_/);
  });

  it('refuses a duplicate handle or email with exit 1 and a JSON error naming the taken field', async () => {
    const args = ['users', 'create', '--handle', 'dup-user', '--email', 'dup@example.com'];
    json(await runCli(args, env));
    const res = await runCli(args, env);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(JSON.parse(res.stderr.trim())).toMatchObject({ error: 'already_exists' });
    const email = await runCli(
      ['users', 'create', '--handle', 'dup-other', '--email', 'DUP@example.com'],
      env,
    );
    expect(email.code).toBe(1);
    expect(JSON.parse(email.stderr.trim())).toMatchObject({
      error: 'already_exists',
      details: [{ field: 'email', code: 'taken' }],
    });
  });

  it("names fields in errors as REST does, the shapes' own names", async () => {
    const price = await runCli(['products', 'create', '--name', 'Gold', '--price-cents', '100000001'], env);
    expect(price.code).toBe(1);
    const priceError = JSON.parse(price.stderr.trim());
    expect(priceError.details).toEqual([
      expect.objectContaining({ field: 'price_cents', code: 'range_error' }),
    ]);
    expect(priceError.details[0].message).toMatch(/^price_cents /);
    const org = await runCli(
      ['users', 'create', '--handle', 'lost', '--email', 'lost@example.com', '--org', 'org_x'],
      env,
    );
    expect(org.code).toBe(1);
    expect(JSON.parse(org.stderr.trim()).details).toEqual([
      expect.objectContaining({ field: 'organization_id', code: 'unknown_organization' }),
    ]);
  });

  it('prints help on stdout when asked, for the whole command line and for one command', async () => {
    // No configuration is read for help: a database that cannot open does not stand in the way.
    const broken = { DATABASE_URL: 'sqlite:/dev/null/no/atrium.db' };
    const all = await runCli(['--help'], broken);
    expect(all.code).toBe(0);
    expect(all.stderr).toBe('');
    expect(all.stdout).toContain('users create --handle H --email E');
    expect(all.stdout).toContain('webhooks send-test ID --type T');
    expect(all.stdout).toContain('serve [--role api|auth|grpc|worker[,...]]');
    const one = await runCli(['api-keys', 'create', '--help'], broken);
    expect(one).toEqual({
      code: 0,
      stdout:
        'usage: atrium api-keys create --user ID [--tier free|starter|growth|enterprise] [--mode test|live]\n',
      stderr: '',
    });
    const group = await runCli(['users', '--help'], broken);
    expect(group.code).toBe(0);
    expect(group.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^usage: atrium users create --handle H/),
      'usage: atrium users delete ID',
    ]);
    const unknown = await runCli(['frob', '--help'], broken);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stderr.trim()).message).toBe('unknown command "frob"; run "atrium --help"');
    const missing = await runCli(['webhooks', 'send-test', '--type', 'user.updated'], env);
    expect(missing.code).toBe(2);
    expect(JSON.parse(missing.stderr.trim()).message).toBe('usage: atrium webhooks send-test ID --type T');
    const none = await runCli([], broken);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe('');
    expect(none.stderr).toContain('usage: atrium <command>');
  });

  it('refuses invalid input with exit 1 naming the field', async () => {
    const res = await runCli(['users', 'create', '--handle', 'x', '--email', 'not-an-email'], env);
    expect(res.code).toBe(1);
    const err = JSON.parse(res.stderr.trim());
    expect(err.error).toBe('validation_error');
    expect(err.details.map((d: { field: string }) => d.field).sort()).toEqual(['email', 'handle']);
  });

  it('exits 2 on bad usage', async () => {
    for (const args of [
      ['users', 'create', '--nope'],
      ['frobnicate'],
      ['users', 'create', '--handle', 'a1b', '--email', 'a@b.co', '--role', 'owner'],
      [],
    ]) {
      const res = await runCli(args, env);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stdout).toBe('');
    }
  });

  it('stops on bad configuration with one line naming the variable', async () => {
    const res = await runCli(['migrate'], { ...env, GRPC_PORT: 'ninety' });
    expect(res.code).toBe(1);
    const lines = res.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ error: 'invalid_configuration', variable: 'GRPC_PORT' });
  });

  /** The one stderr line of a start refused for its configuration. */
  const refusal = (res: { code: number | null; stdout: string; stderr: string }) => {
    expect(res.code, res.stderr).toBe(1);
    expect(res.stdout).toBe('');
    const lines = res.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    return JSON.parse(lines[0]!) as { error: string; variable: string; message: string };
  };

  it('reads .env from the folder it runs in, stops on a line it cannot read and warns of a misspelt setting', async () => {
    const folder = mkdtempSync(join(dir, 'envfile-'));
    const envFile = join(folder, '.env');
    // A value the environment does not set comes from .env: here a GRPC_PORT the schema refuses.
    writeFileSync(envFile, '# settings\nGRPC_PORT=ninety\n');
    expect(refusal(await runCli(['migrate'], env, folder))).toMatchObject({ variable: 'GRPC_PORT' });
    // The environment wins over the file.
    const winner = await runCli(['migrate'], { ...env, GRPC_PORT: '0' }, folder);
    expect(winner.code, winner.stderr).toBe(0);

    writeFileSync(envFile, 'HOST=127.0.0.1\nPORT 4000\n');
    const badLine = refusal(await runCli(['migrate'], env, folder));
    expect(badLine).toMatchObject({ error: 'invalid_configuration', variable: '.env line 2' });
    expect(badLine.message).toContain('PORT 4000');

    writeFileSync(envFile, '# where\nDATABSE_URL=postgres://elsewhere/db\n');
    const typo = await runCli(['migrate'], { ...env, LOG_LEVEL: 'warn' }, folder);
    expect(typo.code, typo.stderr).toBe(0);
    const warnings = typo.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warnings).toEqual([
      expect.objectContaining({ level: 40, file: '.env', line: 2, key: 'DATABSE_URL' }),
    ]);
    expect(warnings[0]!.msg).toContain('did you mean DATABASE_URL?');

    rmSync(envFile);
    mkdirSync(envFile);
    const unreadable = refusal(await runCli(['migrate'], env, folder));
    expect(unreadable).toMatchObject({ error: 'invalid_configuration', variable: '.env' });
    expect(unreadable.message).toContain('EISDIR');
  });

  it('names DATABASE_URL when the SQLite file cannot have a folder, for serve and the admin commands', async () => {
    // /dev/null is a file: no folder can be made under it.
    const bad = { DATABASE_URL: 'sqlite:/dev/null/data/atrium.db', PORT: '0', GRPC_PORT: '0' };
    for (const args of [['serve'], ['migrate']]) {
      const failure = refusal(await runCli(args, bad));
      expect(failure, args[0]).toMatchObject({ error: 'invalid_configuration', variable: 'DATABASE_URL' });
      expect(failure.message).toContain('/dev/null/data');
    }
  });

  it('names DATABASE_URL when the database cannot be opened, reached or logged in to', async () => {
    const notDatabase = join(dir, 'notes.txt');
    writeFileSync(notDatabase, 'not an SQLite file');
    const cases: [string, RegExp][] = [
      [`sqlite:${notDatabase}`, /file is not a database/],
      // A folder where the file should be.
      [`sqlite:${dir}`, /unable to open database file/],
      // Port 1: nothing listens there; the password must not be echoed back.
      ['postgres://atrium:hunter2@127.0.0.1:1/atrium', /ECONNREFUSED/],
    ];
    if (db.dialect === 'postgres') {
      const missing = new URL(db.url);
      missing.pathname = '/atrium_no_such_database';
      cases.push([missing.toString(), /database "atrium_no_such_database" does not exist/]);
    }
    for (const [url, reason] of cases) {
      for (const args of [['migrate'], ['orgs', 'create', '--name', 'X']]) {
        const failure = refusal(await runCli(args, { DATABASE_URL: url }));
        expect(failure, `${args[0]} ${url}`).toMatchObject({
          error: 'invalid_configuration',
          variable: 'DATABASE_URL',
        });
        expect(failure.message).toMatch(reason);
        expect(failure.message).not.toContain('hunter2');
      }
    }
  });

  it('names REDIS_URL, for serve and the admin commands, when its database index is not a number or not on the server', async () => {
    const withPath = (path: string) => {
      const u = new URL(TEST_REDIS_URL);
      u.pathname = path;
      return u.toString();
    };
    // A path ioredis would send as SELECT NaN; then an index out of the server's range (16 by default).
    for (const [redisUrl, problem] of [
      [withPath('/abc'), 'non-negative integer, got "abc"'],
      [withPath('/99'), 'SELECT 99'],
    ] as const) {
      for (const args of [['serve'], ['orgs', 'create', '--name', 'Refused']]) {
        const failure = refusal(
          await runCli(args, { ...env, REDIS_URL: redisUrl, PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'info' }),
        );
        expect(failure, `${args[0]} ${redisUrl}`).toMatchObject({
          error: 'invalid_configuration',
          variable: 'REDIS_URL',
        });
        expect(failure.message).toContain(problem);
      }
    }
  });

  it('refuses PORT equal to GRPC_PORT when serve would listen on both', async () => {
    const failure = refusal(
      await runCli(['serve', '--role', 'api,grpc'], {
        ...env,
        PORT: '4650',
        GRPC_PORT: '4650',
        LOG_LEVEL: 'info',
      }),
    );
    expect(failure).toMatchObject({ error: 'invalid_configuration', variable: 'GRPC_PORT' });
    expect(failure.message).toContain('a port other than PORT (both are 4650');
  });

  // A dozen process starts: several seconds each on a loaded CI machine.
  it(
    'names DATABASE_URL for a PostgreSQL URL that cannot be read, or an sslmode the server cannot give',
    { timeout: 240_000 },
    async () => {
      const cases: [string, RegExp][] = [
        ['postgres://postgres@127.0.0.1:notaport/cfgfix_x', /not a URL/],
        ['postgres://postgres@127.0.0.1:99999/cfgfix_x', /port \(1-65535\)/],
        ['postgres://postgres@127.0.0.1:65536/cfgfix_x', /port \(1-65535\)/],
        ['postgres://atrium:hunter2@[::1/cfgfix_x', /IPv6/],
        ['postgres://postgres@127.0.0.1:1/cfgfix_x?sslmode=bogus', /sslmode must be one of/],
      ];
      // The suite's server has no TLS: sslmode=require asks for what it cannot give.
      if (db.dialect === 'postgres') {
        for (const mode of ['require', 'verify-full']) {
          const u = new URL(db.url);
          u.searchParams.set('sslmode', mode);
          cases.push([u.toString(), /does not support SSL connections/]);
        }
      }
      for (const [url, reason] of cases) {
        for (const args of [['migrate'], ['serve']]) {
          // LOG_LEVEL info: nothing but the one line may reach stderr (node-postgres's SECURITY WARNING would).
          const failure = refusal(
            await runCli(args, { DATABASE_URL: url, PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'info' }),
          );
          expect(failure, `${args[0]} ${url}`).toMatchObject({
            error: 'invalid_configuration',
            variable: 'DATABASE_URL',
          });
          expect(failure.message, url).toMatch(reason);
          expect(failure.message).not.toContain('hunter2');
        }
      }
    },
  );

  // A dozen process starts: several seconds each on a loaded CI machine.
  it(
    'names DATABASE_URL when the SQLite file or its folder cannot be written',
    { timeout: 240_000 },
    async () => {
      // /proc takes no new files: serve cannot make its lock there.
      const proc = refusal(
        await runCli(['serve'], { DATABASE_URL: 'sqlite:/proc/cfgfix-walk.db', PORT: '0', GRPC_PORT: '0' }),
      );
      expect(proc).toMatchObject({ error: 'invalid_configuration', variable: 'DATABASE_URL' });
      expect(proc.message).toContain('serve-lock');

      const folder = mkdtempSync(join(dir, 'read-only-'));
      const file = join(folder, 'atrium.db');
      const url = `sqlite:${file}`;
      expect((await runCli(['migrate'], { DATABASE_URL: url })).code).toBe(0);
      for (const [target, isFolder, commands] of [
        [file, false, [['migrate'], ['orgs', 'create', '--name', 'Refused']]],
        [folder, true, [['serve'], ['migrate'], ['orgs', 'create', '--name', 'Refused']]],
      ] as const) {
        const undo = readOnly(target, isFolder);
        if (!undo) continue; // root without chattr +i: nothing here can make it read-only
        try {
          for (const args of commands) {
            const failure = refusal(
              await runCli([...args], { DATABASE_URL: url, PORT: '0', GRPC_PORT: '0' }),
            );
            expect(failure, `${args.join(' ')} on a read-only ${isFolder ? 'folder' : 'file'}`).toMatchObject(
              {
                error: 'invalid_configuration',
                variable: 'DATABASE_URL',
              },
            );
            expect(failure.message).toMatch(/not writable|cannot make the lock/);
          }
        } finally {
          undo();
        }
      }
    },
  );

  it('refuses a second serve on one SQLite file reached through a symbolic link', async () => {
    const folder = mkdtempSync(join(dir, 'linked-'));
    mkdirSync(join(folder, 'real'));
    symlinkSync(join(folder, 'real'), join(folder, 'folder-link'));
    const file = join(folder, 'real', 'atrium.db');
    const served = await serve({ DATABASE_URL: `sqlite:${file}`, GRPC_PORT: '0' }, { roles: 'api,worker' });
    try {
      symlinkSync(file, join(folder, 'file-link.db'));
      for (const other of [join(folder, 'folder-link', 'atrium.db'), join(folder, 'file-link.db')]) {
        const failure = refusal(
          await runCli(['serve', '--role', 'api,worker'], {
            DATABASE_URL: `sqlite:${other}`,
            PORT: '0',
            GRPC_PORT: '0',
          }),
        );
        expect(failure, other).toMatchObject({ error: 'invalid_configuration', variable: 'DATABASE_URL' });
        expect(failure.message).toContain(`process ${served.child.pid} already serves it`);
      }
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it('names PERSISTED_QUERIES_FILE when the manifest is missing, not JSON, or wrong', async () => {
    const notJson = join(dir, 'not-json.json');
    writeFileSync(notJson, 'hash: query');
    const wrong = join(dir, 'wrong.json');
    writeFileSync(wrong, JSON.stringify({ ['0'.repeat(64)]: '{ a }' }));
    const cases = [
      [join(dir, 'missing.json'), 'ENOENT'],
      [notJson, 'not JSON'],
      [wrong, 'is not the SHA-256 of its query'],
    ] as const;
    for (const [file, problem] of cases) {
      const failure = refusal(
        await runCli(['serve', '--role', 'api'], { ...env, PORT: '0', PERSISTED_QUERIES_FILE: file }),
      );
      expect(failure, file).toMatchObject({
        error: 'invalid_configuration',
        variable: 'PERSISTED_QUERIES_FILE',
      });
      expect(failure.message).toContain(problem);
      expect(failure.message).toContain(file);
    }
  });

  it('serve answers /readyz, then drains and exits 0 on SIGTERM', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--role', 'api'], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { PATH: process.env.PATH ?? '', ...env, PORT: '0', LOG_LEVEL: 'info', NODE_ENV: 'test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start line: ${stderr}`)), 15_000);
      child.stderr.on('data', (d) => {
        stderr += d;
        const m = /"http":"(http:\/\/[^"]+)"/.exec(stderr);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
    });
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
    expect(stderr).toContain('"msg":"stopped"');
    // Without the worker role on SQLite nothing can deliver webhooks: the process says so.
    const warned = stderr.includes('"msg":"no worker role on this SQLite database');
    expect(warned).toBe(db.dialect === 'sqlite');
  });

  it('serve with the worker role among its roles does not warn of a missing worker', async () => {
    const served = await serve({ ...env, GRPC_PORT: '0' }, { roles: 'api,worker' });
    expect(await served.stop()).toBe(0);
    expect(served.stderr()).toContain('"msg":"stopped"');
    expect(served.stderr()).not.toContain('no worker role');
  });

  it('stops serve with one line naming PORT, GRPC_PORT or HOST when the system refuses the address or cannot resolve HOST', async () => {
    const { createServer } = await import('node:net');
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as { port: number }).port);
      const http = refusal(
        await runCli(['serve', '--role', 'api'], {
          ...env,
          HOST: '127.0.0.1',
          PORT: port,
          LOG_LEVEL: 'info',
        }),
      );
      expect(http).toMatchObject({ error: 'invalid_configuration', variable: 'PORT' });
      expect(http.message).toContain(`127.0.0.1:${port}: EADDRINUSE`);
      const grpc = refusal(
        await runCli(['serve', '--role', 'api,grpc'], {
          ...env,
          HOST: '127.0.0.1',
          PORT: '0',
          GRPC_PORT: port,
          // grpc-js's own "No address added" line would be a second line at this level.
          LOG_LEVEL: 'info',
        }),
      );
      expect(grpc).toMatchObject({ error: 'invalid_configuration', variable: 'GRPC_PORT' });
      expect(grpc.message).toContain('EADDRINUSE');
      // `atrium cluster` checks its ports before it reaches the database (nothing listens on port 1).
      const cluster = refusal(
        await runCli(
          ['cluster', '--http-port', port, '--database-url', 'postgres://postgres@127.0.0.1:1/x'],
          env,
        ),
      );
      expect(cluster).toMatchObject({ error: 'invalid_configuration', variable: 'CLUSTER_HTTP_PORT' });
      expect(cluster.message).toContain(`127.0.0.1:${port}: EADDRINUSE`);
    } finally {
      taken.close();
    }
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, never a local address.
    const host = refusal(await runCli(['serve', '--role', 'api'], { ...env, HOST: '192.0.2.1', PORT: '0' }));
    expect(host).toMatchObject({ error: 'invalid_configuration', variable: 'HOST' });
    expect(host.message).toContain('EADDRNOTAVAIL');
    // A name that never resolves (RFC 6761's .invalid): HTTP binding it first with PORT=0, gRPC
    // with a fixed PORT (grpc-js words it "Name resolution failed"); HOST's error either way.
    for (const [roles, ports] of [
      ['api', { PORT: '0' }],
      ['api,grpc', { PORT: String(await freePort()), GRPC_PORT: '0' }],
    ] as const) {
      const unresolved = refusal(
        await runCli(['serve', '--role', roles], { ...env, HOST: 'no-such-host.invalid', ...ports }),
      );
      expect(unresolved, roles).toMatchObject({ error: 'invalid_configuration', variable: 'HOST' });
      expect(unresolved.message).toContain('a name that resolves');
    }
  });
});
