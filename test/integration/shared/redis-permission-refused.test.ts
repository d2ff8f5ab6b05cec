import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { ensureBuilt } from '../../helpers/build.js';
import { type CliResult, runBuiltCliBounded } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { call } from '../../helpers/rest-client.js';
import { serve } from '../../helpers/serve.js';
import pg from 'pg';
import { freePorts, freeRun, NGINX, OwnRedis } from '../cluster/support.js';

/**
 * A REDIS_URL whose ACL user logs in but may not run a command Atrium sends, or touch its keys or
 * channels, is a setting to change, like a refused login (redis-auth-refused.test.ts): the start
 * stops with one line naming REDIS_URL (password masked) and Redis's NOPERM, exit 1. Until
 * 2026-11-29 such a process started and read as ready (PING allowed) while its rate limits were
 * off, its cache unused and its broadcasts lost, for good. A permission taken away from a running
 * process is logged as a permission problem, not as an outage.
 *
 * The users live on this test's own redis-server, never the shared one.
 */

const PASSWORD = 'acl-user-secret';

/** The rules docs/configuration.md gives for Atrium's own Redis user, word for word. */
const DOCUMENTED_RULES =
  '~atrium:* &atrium:* -@all +ping +select +get +set +del +scan +unlink +evalsha +eval ' +
  '+time +zremrangebyscore +zcard +zadd +pexpire +zrange +publish +subscribe +unsubscribe';

/** The one stderr line of a start refused for its configuration. */
function refusal(res: CliResult): { error: string; variable: string; message: string } {
  expect(res.code, res.stderr).toBe(1);
  expect(res.stdout).toBe('');
  const lines = res.stderr.trim().split('\n');
  expect(lines, res.stderr).toHaveLength(1);
  return JSON.parse(lines[0]!) as { error: string; variable: string; message: string };
}

describe('a Redis user that logs in but may not run what Atrium sends', { timeout: 240_000 }, () => {
  let server: OwnRedis;
  let admin: Redis;
  let database: TestDatabase;
  let cwd: string;
  const url = (user: string) => `redis://${user}:${PASSWORD}@127.0.0.1:${server.port}`;
  const env = (user: string) => ({
    DATABASE_URL: database.url,
    REDIS_URL: url(user),
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_PORT: '0',
    LOG_LEVEL: 'info',
  });
  const user = (name: string, rules: string) =>
    admin.call('ACL', 'SETUSER', name, 'reset', 'on', `>${PASSWORD}`, ...rules.split(' '));

  beforeAll(async () => {
    ensureBuilt();
    server = await OwnRedis.start();
    admin = new Redis(server.url, { maxRetriesPerRequest: 2 });
    database = await freshDatabase();
    cwd = mkdtempSync(join(tmpdir(), 'redis-noperm-'));
  }, 240_000);
  afterAll(async () => {
    await admin?.quit().catch(() => admin.disconnect());
    await server?.stop();
    await database?.drop();
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  const refused: Array<[string, string, RegExp]> = [
    ['PING and nothing else', '~* &* -@all +ping', /NOPERM .*'set' command/],
    ['everything but scripts', '~* &* +@all -evalsha -eval', /NOPERM .*'evalsha' command/],
    [
      "scripts, but not a command the limiter's script calls",
      DOCUMENTED_RULES.replace(' +zadd', ''),
      /The user executing the script can't run this command/,
    ],
    ['no channels (Redis 7 gives a new user none)', '~* resetchannels +@all', /NOPERM .*channels/],
    ['keys other than atrium:*', '~other:* &* +@all', /NOPERM .*keys/],
    ['everything but SUBSCRIBE', '~* &* +@all -subscribe', /NOPERM .*'subscribe' command/],
  ];

  for (const [what, rules, reason] of refused) {
    it(`serve stops at start, exit 1, one line naming REDIS_URL: ${what}`, async () => {
      await user('limited', rules);
      const line = refusal(await runBuiltCliBounded(['serve', '--role', 'api'], env('limited')));
      expect(line).toMatchObject({ error: 'invalid_configuration', variable: 'REDIS_URL' });
      expect(line.message).toMatch(reason);
      expect(line.message).toContain('a Redis user allowed the commands');
      expect(line.message).toContain(`limited:***@127.0.0.1:${server.port}`);
      expect(line.message).not.toContain(PASSWORD);
    });
  }

  it('the worker role and an admin command stop the same way', async () => {
    await user('noscripts', '~* &* +@all -evalsha -eval');
    for (const args of [
      ['serve', '--role', 'worker'],
      ['orgs', 'create', '--name', 'Refused By Redis ACL'],
    ]) {
      const line = refusal(await runBuiltCliBounded(args, env('noscripts')));
      expect(line, args.join(' ')).toMatchObject({ error: 'invalid_configuration', variable: 'REDIS_URL' });
      expect(line.message, args.join(' ')).toMatch(/NOPERM .*'evalsha'/);
    }
  });

  it('the documented rules start, ready, with only JSON lines in the log (INFO is not among them)', async () => {
    await user('atrium', DOCUMENTED_RULES);
    const served = await serve(env('atrium'), { asUser: { cwd }, roles: 'api' });
    try {
      expect((await fetch(`${served.url}/readyz`)).status).toBe(200);
      // ioredis's ready check sends INFO; its refusal must not put plain text among the JSON lines.
      for (const line of served
        .stderr()
        .split('\n')
        .filter((l) => l !== ''))
        expect(() => JSON.parse(line), line).not.toThrow();
      expect(served.stderr()).not.toContain('NOPERM');
      // The start's probe leaves nothing behind.
      expect(await admin.keys('atrium:*')).toEqual([]);
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it.skipIf(!NGINX)('atrium cluster stops before it starts a process, naming CLUSTER_REDIS_URL', async () => {
    // SUBSCRIBE is the last command the start tries, on a connection of its own.
    await user('nosubscribe', '~* &* +@all -subscribe');
    const [httpPort, grpcPort] = await freePorts(2);
    const base = await freeRun(7);
    const name = `atrium_redis_noperm_${process.pid}`;
    const adminPg = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
    await adminPg.connect();
    try {
      const line = refusal(
        await runBuiltCliBounded(['cluster'], {
          CLUSTER_HTTP_PORT: String(httpPort),
          CLUSTER_GRPC_PORT: String(grpcPort),
          CLUSTER_BASE_PORT: String(base),
          CLUSTER_DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${name}`,
          CLUSTER_REDIS_URL: url('nosubscribe'),
          CLUSTER_NGINX: NGINX!,
        }),
      );
      expect(line).toMatchObject({ error: 'invalid_configuration', variable: 'CLUSTER_REDIS_URL' });
      expect(line.message).toMatch(/NOPERM .*'subscribe'/);
      expect(line.message).not.toContain(PASSWORD);
    } finally {
      await adminPg.query(`DROP DATABASE IF EXISTS ${name}`);
      await adminPg.end();
    }
  });

  describe('a permission taken away from a running process', () => {
    const log = memoryLog('warn');
    let atrium: TestAtrium;
    let base: string;
    let headers: Record<string, string>;
    const orders = () => call(base, 'GET', '/api/v2/orders?limit=1', { headers });

    beforeAll(async () => {
      await user('rotating', DOCUMENTED_RULES);
      atrium = await startTestAtrium({ REDIS_URL: url('rotating'), HOST: '127.0.0.1', LOG_LEVEL: 'warn' });
      atrium.services.sharedHealth.useLogger(log.logger);
      base = (await atrium.listen()).httpUrl!;
      headers = (await atrium.caller({ tier: 'free' })).headers;
    });
    afterAll(async () => {
      await atrium?.stop();
    });

    it('is logged as a permission problem, not as an outage, and limits return with it', async () => {
      expect((await orders()).headers.get('x-ratelimit-limit')).toBe('100');

      await admin.call('ACL', 'SETUSER', 'rotating', '-evalsha', '-eval');
      const unlimited = await orders();
      expect(unlimited.status).toBe(200);
      expect(unlimited.headers.get('x-ratelimit-limit')).toBeNull();
      const warnings = log.lines.map((l) => String(l.msg));
      expect(warnings.filter((m) => m.startsWith('Redis'))).toEqual([
        'Redis denied permission: the user in REDIS_URL may not run a command Atrium needs (its ACL ' +
          'rules); rate limits fail open (requests are not limited)',
      ]);
      expect(log.lines.find((l) => String(l.msg).startsWith('Redis denied'))?.err).toMatch(/NOPERM/);

      await admin.call('ACL', 'SETUSER', 'rotating', '+evalsha', '+eval');
      expect((await orders()).headers.get('x-ratelimit-limit')).toBe('100');
      // The connection never dropped, so no reconnection closes the episode: the first call that
      // goes through does, once (until 2026-11-29 nothing said it, and a second refusal went unlogged).
      expect((await orders()).headers.get('x-ratelimit-limit')).toBe('100');
      const redisLines = () => log.lines.map((l) => String(l.msg)).filter((m) => m.startsWith('Redis'));
      expect(redisLines()).toEqual([
        expect.stringMatching(/^Redis denied permission: .*rate limits fail open/),
        'Redis permits rate_limiter again: the user in REDIS_URL may run the commands it needs',
      ]);

      await admin.call('ACL', 'SETUSER', 'rotating', '-evalsha', '-eval');
      expect((await orders()).headers.get('x-ratelimit-limit')).toBeNull();
      expect(redisLines()).toHaveLength(3);
      expect(redisLines()[2]).toMatch(/^Redis denied permission: /);
      await admin.call('ACL', 'SETUSER', 'rotating', '+evalsha', '+eval');
      expect((await orders()).headers.get('x-ratelimit-limit')).toBe('100');
      expect(redisLines()).toHaveLength(4);
    });
  });
});
