import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { runCli } from '../../helpers/cli.js';
import { testDialect } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';

/**
 * `atrium users delete` is another process: on SQLite it has no bus to the serving one, whose user
 * cache is in its memory; on PostgreSQL the two share the cache through Redis, as deployed. Either
 * way the next REST read must not answer the deleted user from the cache.
 */
describe('a user deleted by the admin command while the server runs', () => {
  let atrium: TestAtrium;
  let dir: string | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    if (testDialect() === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-users-cli-'));
      env = { DATABASE_URL: `sqlite:${join(dir, 'atrium.db')}` };
    } else {
      env = { REDIS_URL: TEST_REDIS_URL };
    }
    atrium = await startTestAtrium(env);
    if (testDialect() === 'postgres') env.DATABASE_URL = atrium.config.databaseUrl;
  });
  afterAll(async () => {
    await atrium?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is not found on the next read, though it was cached', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const doomed = await atrium.caller();
    const get = () =>
      atrium.http!.inject({ method: 'GET', url: `/v1/users/${doomed.userId}`, headers: admin.headers });
    expect((await get()).statusCode).toBe(200);
    expect((await get()).headers['x-cache']).toBe('HIT');

    const deleted = await runCli(['users', 'delete', doomed.userId], env);
    expect(deleted.code, deleted.stderr).toBe(0);

    const after = await get();
    expect(after.statusCode).toBe(404);
    expect(after.json().error).toBe('NOT_FOUND');
  });

  it('keeps the cache for reads that no other process has written under', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const kept = await atrium.caller();
    const get = () =>
      atrium.http!.inject({ method: 'GET', url: `/v1/users/${kept.userId}`, headers: admin.headers });
    expect((await get()).headers['x-cache']).toBe('MISS');
    expect((await get()).headers['x-cache']).toBe('HIT');
    expect((await get()).headers['x-cache']).toBe('HIT');
  });
});
