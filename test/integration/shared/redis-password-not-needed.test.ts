import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { serve } from '../../helpers/serve.js';

/**
 * A REDIS_URL with a password for a Redis that needs none (the `default` user has no password):
 * Redis refuses the AUTH, ioredis goes on without it, which works, and used to say so with a
 * `console.warn` ("[WARN] This Redis server's `default` user does not require a password, but a
 * password was supplied"), a plain-text line among the process's JSON log lines, from `serve` and
 * every command alike. It is now one pino warning per process, whatever the number of connections
 * (the broadcast's listening connection authenticates too) and reconnections.
 */

const WARNING = 'REDIS_URL gives a password, but this Redis server requires none: connected without it';

/** Every line of `stderr` parsed as JSON (an empty last line aside); throws on the first that is not. */
function jsonLines(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`a stderr line is not JSON: ${line}`);
      }
    });
}

const target = new URL(TEST_REDIS_URL);

describe.skipIf(target.password !== '')('a REDIS_URL password Redis does not need', () => {
  const withPassword = new URL(TEST_REDIS_URL);
  withPassword.password = 'not-needed';
  let database: TestDatabase;
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('serve: every stderr line is JSON, and the password is one warning', async () => {
    const served = await serve(
      { DATABASE_URL: database.url, REDIS_URL: withPassword.toString() },
      { roles: 'api' },
    );
    // Started: the commands connection and the broadcast's listening connection (the comment feed
    // waits for its SUBSCRIBE at start) have both authenticated.
    const ready = await fetch(`${served.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await served.stop()).toBe(0);
    const lines = jsonLines(served.stderr());
    const warnings = lines.filter((l) => l.msg === WARNING);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, err: expect.stringMatching(/password/) });
    // The password is not in the log.
    expect(served.stderr()).not.toContain('not-needed');
  }, 60_000);

  it('a command: stdout is its one JSON object, every stderr line is JSON', async () => {
    const result = await runCli(['orgs', 'create', '--name', 'Password Not Needed'], {
      DATABASE_URL: database.url,
      REDIS_URL: withPassword.toString(),
      LOG_LEVEL: 'info',
    });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ name: 'Password Not Needed' });
    const warnings = jsonLines(result.stderr).filter((l) => l.msg === WARNING);
    expect(warnings).toHaveLength(1);
    expect(result.stderr).not.toContain('not-needed');
  }, 60_000);
});
