import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/database.js';
import { OUTAGE_ADMIN_URL, postgresMissing } from '../helpers/database-outage.js';
import { serve } from '../helpers/serve.js';

/**
 * README: only the password of DATABASE_URL is masked. A URL that does not parse (port 99999) used
 * to lose its whole user part (`postgres://***@...`) even with no password in it.
 */
describe('DATABASE_URL in a configuration error', { timeout: 60_000 }, () => {
  const shown = async (url: string) => {
    const res = await runCli(['migrate'], { DATABASE_URL: url });
    expect(res.code, res.stderr).toBe(1);
    return (JSON.parse(res.stderr.trim()) as { message: string }).message;
  };

  it('keeps the user when there is no password', async () => {
    expect(await shown('postgres://alice@127.0.0.1:99999/x')).toContain(
      'got "postgres://alice@127.0.0.1:99999/x"',
    );
  });

  it('masks the password only', async () => {
    const message = await shown('postgres://alice:hunter2@127.0.0.1:99999/x');
    expect(message).toContain('got "postgres://alice:***@127.0.0.1:99999/x"');
    expect(message).not.toContain('hunter2');
  });
});

/**
 * node-postgres and ioredis read `?password=` as the password, so it is one; it used to be printed
 * in clear in the start error and on the `atrium started` line.
 */
const pgMissing = await postgresMissing();

describe('a password given as a query parameter', { timeout: 60_000 }, () => {
  it('is masked in the start error of DATABASE_URL', async () => {
    const res = await runCli(['migrate'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/db?password=PGSECRET4',
    });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).not.toContain('PGSECRET4');
    expect(JSON.parse(res.stderr.trim())).toMatchObject({ variable: 'DATABASE_URL' });
    expect(res.stderr).toContain('got \\"postgres://postgres@127.0.0.1:1/db?password=***\\"');
  });

  it('is masked in the start error of REDIS_URL', async () => {
    const res = await runCli(['migrate'], {
      DATABASE_URL: 'sqlite::memory:',
      REDIS_URL: 'redis://127.0.0.1:6379/abc?password=REDISQPW',
    });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).not.toContain('REDISQPW');
    expect(res.stderr).toContain('got \\"redis://127.0.0.1:6379/abc?password=***\\"');
  });

  it.skipIf(pgMissing)('is masked on the atrium started line', async () => {
    const db = await freshDatabase({ adminUrl: OUTAGE_ADMIN_URL });
    try {
      // Trust authentication: the password is sent to no one, and the start goes ahead.
      const url = new URL(db.url);
      url.search = '?application_name=x&password=PGQUERYPASS';
      const served = await serve({ DATABASE_URL: url.toString() }, { roles: 'api' });
      try {
        const started = served
          .stderr()
          .split('\n')
          .find((l) => l.includes('"atrium started"'))!;
        expect(started).not.toContain('PGQUERYPASS');
        expect(JSON.parse(started).database).toMatch(/\?application_name=x&password=\*\*\*$/);
      } finally {
        expect(await served.stop()).toBe(0);
      }
    } finally {
      await db.drop();
    }
  });
});
