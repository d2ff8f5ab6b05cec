import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../../helpers/build.js';
import { type CliResult, runBuiltCliBounded as runBounded } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { type Served, serve } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';
import { freePorts, freeRun, NGINX, OwnRedis } from '../cluster/support.js';

/**
 * A REDIS_URL whose login Redis refuses (a wrong password: WRONGPASS; none where the server
 * requires one: NOAUTH; an ACL user the server does not have: WRONGPASS) is a setting to change,
 * like a database that refuses its login: the start stops with one line naming REDIS_URL (password
 * masked) and Redis's reason, exit 1. Until 2026-11-29 the process waited its 5 s for Redis, logged
 * `redis error; reconnecting` and started degraded, limits off, for good. A Redis that cannot be
 * reached still only degrades, and a refusal that begins while the process runs (a password changed
 * on the server) degrades and is logged as what it is, without stopping the process.
 *
 * The server requiring a password is this test's own redis-server, never the shared one.
 */

const PASSWORD = 'redis-auth-secret';
const ALICE_PASSWORD = 'alice-auth-secret';

/** The one stderr line of a start refused for its configuration. */
function refusal(res: CliResult): { error: string; variable: string; message: string } {
  expect(res.code, res.stderr).toBe(1);
  expect(res.stdout).toBe('');
  const lines = res.stderr.trim().split('\n');
  expect(lines, res.stderr).toHaveLength(1);
  return JSON.parse(lines[0]!) as { error: string; variable: string; message: string };
}

/** Every stderr line of a process, parsed (each is one JSON object). */
const logLines = (stderr: string): Array<{ level?: number; msg?: string; err?: unknown }> =>
  stderr
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { level?: number; msg?: string; err?: unknown });

describe('a Redis that refuses the login REDIS_URL gives', { timeout: 240_000 }, () => {
  let server: OwnRedis;
  let admin: Redis;
  let database: TestDatabase;
  let cwd: string;
  const url = (userInfo: string) => `redis://${userInfo}127.0.0.1:${server.port}`;
  const env = (redisUrl: string) => ({
    DATABASE_URL: database.url,
    REDIS_URL: redisUrl,
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_PORT: '0',
    LOG_LEVEL: 'info',
  });

  beforeAll(async () => {
    ensureBuilt();
    server = await OwnRedis.start(['--requirepass', PASSWORD]);
    admin = new Redis(url(`:${PASSWORD}@`), { maxRetriesPerRequest: 2 });
    // An ACL user of its own, to tell "a user the server does not have" from "no ACL users at all".
    await admin.call('ACL', 'SETUSER', 'alice', 'on', `>${ALICE_PASSWORD}`, '~*', '&*', '+@all');
    database = await freshDatabase();
    cwd = mkdtempSync(join(tmpdir(), 'redis-auth-'));
    // ensureBuilt may compile dist/ first: a minute or more on a loaded 2-core machine.
  }, 240_000);
  afterAll(async () => {
    await admin?.quit().catch(() => admin.disconnect());
    await server?.stop();
    await database?.drop();
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  const refused: Array<[string, () => string, RegExp, string | undefined]> = [
    ['a wrong password (WRONGPASS)', () => url(':wrong-password@'), /WRONGPASS/, 'wrong-password'],
    ['no password where one is required (NOAUTH)', () => url(''), /NOAUTH/, undefined],
    [
      'an ACL user the server does not have (WRONGPASS)',
      () => url('mallory:mallory-pw@'),
      /WRONGPASS/,
      'mallory-pw',
    ],
    [
      'an ACL user with a wrong password (WRONGPASS)',
      () => url('alice:not-alices@'),
      /WRONGPASS/,
      'not-alices',
    ],
  ];

  for (const [what, redisUrl, reason, password] of refused) {
    it(`serve stops at start, exit 1, one line naming REDIS_URL: ${what}`, async () => {
      const line = refusal(await runBounded(['serve'], env(redisUrl())));
      expect(line).toMatchObject({ error: 'invalid_configuration', variable: 'REDIS_URL' });
      expect(line.message).toMatch(reason);
      expect(line.message).toContain('a user and password this Redis server accepts');
      expect(line.message).toContain(`127.0.0.1:${server.port}`);
      if (password) {
        expect(line.message).not.toContain(password);
        expect(line.message).toContain(':***@');
      }
    });
  }

  it('every role stops the same way, and so does an admin command', async () => {
    const wrong = url(':wrong-password@');
    const runs = [
      ['serve', '--role', 'api'],
      ['serve', '--role', 'auth'],
      ['serve', '--role', 'grpc'],
      ['serve', '--role', 'worker'],
      ['orgs', 'create', '--name', 'Refused By Redis'],
    ];
    for (const args of runs) {
      const line = refusal(await runBounded(args, env(wrong)));
      expect(line, args.join(' ')).toMatchObject({ error: 'invalid_configuration', variable: 'REDIS_URL' });
      expect(line.message, args.join(' ')).toMatch(/WRONGPASS/);
    }
  });

  it('the same user with its password starts, and a password changed on the server later only degrades it, logged as a refusal', async () => {
    let served: Served | undefined;
    try {
      served = await serve(env(url(`:${PASSWORD}@`)), { asUser: { cwd }, roles: 'api' });
      const readyz = () => fetch(`${served!.url}/readyz`);
      expect((await readyz()).status).toBe(200);

      // The password changes on the server; connections already made stay logged in, so the
      // server's own are dropped: it meets the new password on its next connection.
      await admin.config('SET', 'requirepass', 'rotated-password');
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await admin.client('KILL', 'TYPE', 'pubsub');
      const refusedLine = 'Redis refused authentication';
      await until(
        () => served!.stderr().includes(refusedLine),
        'the authentication refusal in the log',
        30_000,
      );
      // Still running, degraded: /readyz 503 for Redis, requests still answered.
      expect(served.child.exitCode).toBeNull();
      const degraded = await readyz();
      expect(degraded.status).toBe(503);
      expect(await degraded.text()).toContain('redis');
      expect((await fetch(`${served.url}/healthz`)).status).toBe(200);
      const warning = logLines(served.stderr()).find((l) => l.msg?.includes(refusedLine));
      expect(warning).toMatchObject({ level: 40, err: expect.stringMatching(/WRONGPASS/) });
      expect(warning!.msg).toContain('REDIS_URL');
      expect(served.stderr()).not.toContain(PASSWORD);

      // The server's password back: the process logs in again and is ready.
      await admin.config('SET', 'requirepass', PASSWORD);
      await until(async () => (await readyz()).status === 200, 'ready again', 30_000, 200);
      expect(served.stderr()).toContain('Redis is back');
      expect(await served.stop()).toBe(0);
      served = undefined;
    } finally {
      await served?.kill9();
    }
  });

  it('an ACL user with its password starts', async () => {
    const served = await serve(env(url(`alice:${ALICE_PASSWORD}@`)), { asUser: { cwd }, roles: 'auth' });
    try {
      expect((await fetch(`${served.url}/readyz`)).status).toBe(200);
      expect(served.stderr()).not.toContain(ALICE_PASSWORD);
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it('an unreachable Redis still only degrades: the process starts, logs the outage, is not ready', async () => {
    // Nothing listens on this port (found free, not bound).
    const [closed] = await freePorts(1);
    const served = await serve(env(`redis://:${PASSWORD}@127.0.0.1:${closed}`), {
      asUser: { cwd },
      roles: 'api',
    });
    try {
      expect(served.stderr()).toContain('redis error; reconnecting');
      expect(served.stderr()).toContain('ECONNREFUSED');
      expect(served.stderr()).not.toContain('invalid_configuration');
      expect((await fetch(`${served.url}/readyz`)).status).toBe(503);
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it.skipIf(!NGINX)('atrium cluster stops before it starts a process, naming CLUSTER_REDIS_URL', async () => {
    const [httpPort, grpcPort] = await freePorts(2);
    const base = await freeRun(7);
    const name = `atrium_redis_auth_${process.pid}`;
    const adminPg = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
    await adminPg.connect();
    try {
      const result = await runBounded(['cluster'], {
        CLUSTER_HTTP_PORT: String(httpPort),
        CLUSTER_GRPC_PORT: String(grpcPort),
        CLUSTER_BASE_PORT: String(base),
        CLUSTER_DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${name}`,
        CLUSTER_REDIS_URL: url(':wrong-password@'),
        CLUSTER_NGINX: NGINX!,
      });
      const line = refusal(result);
      expect(line).toMatchObject({ error: 'invalid_configuration', variable: 'CLUSTER_REDIS_URL' });
      expect(line.message).toMatch(/WRONGPASS/);
      expect(line.message).not.toContain('wrong-password');
    } finally {
      await adminPg.query(`DROP DATABASE IF EXISTS ${name}`);
      await adminPg.end();
    }
  });
});
