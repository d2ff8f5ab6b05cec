import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAtrium, type Atrium } from '../../../src/compose.js';
import { runCli } from '../../helpers/cli.js';
import { testDialect } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { startGrpcAtrium, unary, type GrpcAtrium, type UserMessage } from '../grpc/support.js';

/**
 * `atrium users delete`, or a second instance on the same database, is another process: it has no
 * bus to the serving one. On SQLite the serving process notices the other writer's commit; with
 * Redis the two share the cache; on PostgreSQL without Redis the serving process has nothing to
 * notice it by, so it keeps no user cache of its own. Whichever, the next read on every surface
 * must see the change (decisions §3: every cached copy is invalidated).
 */
const SETUPS =
  testDialect() === 'sqlite'
    ? [{ name: 'SQLite', redis: false }]
    : [
        { name: 'PostgreSQL with Redis', redis: true },
        { name: 'PostgreSQL without Redis', redis: false },
      ];

describe.each(SETUPS)('a user changed by another process while the server runs ($name)', ({ redis }) => {
  let atrium: GrpcAtrium;
  let other: Atrium | undefined;
  let dir: string | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    env = redis ? { REDIS_URL: TEST_REDIS_URL } : {};
    if (testDialect() === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-users-cli-'));
      env.DATABASE_URL = `sqlite:${join(dir, 'atrium.db')}`;
    }
    atrium = await startGrpcAtrium(env);
    env.DATABASE_URL = atrium.config.databaseUrl;
    // Another instance on the same database, as a deployment of two api processes runs it.
    other = await createAtrium({ ...atrium.config, port: 0, grpcPort: 0 }, ['api', 'auth']);
  });
  afterAll(async () => {
    await other?.close();
    await atrium?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const restGet = (userId: string, headers: Record<string, string>) =>
    fetch(`${atrium.httpUrl}/v1/users/${userId}`, { headers });

  const graphqlUser = async (userId: string, headers: Record<string, string>) => {
    const res = await fetch(`${atrium.httpUrl}/graphql`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'query ($id: ID!) { user(id: $id) { id firstName } }',
        variables: { id: userId },
      }),
    });
    return ((await res.json()) as { data: { user: { id: string; firstName: string } | null } }).data.user;
  };

  it('is not found on the next read of any surface once the admin command deleted it', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const doomed = await atrium.caller();
    await restGet(doomed.userId, admin.headers);
    const warm = await restGet(doomed.userId, admin.headers);
    expect(warm.status).toBe(200);
    if (redis || testDialect() === 'sqlite') expect(warm.headers.get('x-cache')).toBe('HIT');
    expect((await graphqlUser(doomed.userId, admin.headers))?.id).toBe(doomed.userId);

    const deleted = await runCli(['users', 'delete', doomed.userId], env);
    expect(deleted.code, deleted.stderr).toBe(0);

    // GraphQL and gRPC keep nothing between calls; REST is the surface with a cache to get wrong.
    expect(await graphqlUser(doomed.userId, admin.headers)).toBeNull();
    const grpcRead = await unary<UserMessage>(
      atrium.client(),
      'GetUser',
      { user_id: doomed.userId },
      admin.headers,
    );
    expect(grpcRead.error?.code).toBe(status.NOT_FOUND);
    const after = await restGet(doomed.userId, admin.headers);
    expect(after.status).toBe(404);
    expect(((await after.json()) as { error: string }).error).toBe('NOT_FOUND');
  });

  it('shows a change another instance made on the very next read', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const target = await atrium.caller();
    await restGet(target.userId, admin.headers);
    expect(((await (await restGet(target.userId, admin.headers)).json()) as { name: string }).name).toMatch(
      /^Test /,
    );

    const patched = await other!.http!.inject({
      method: 'PATCH',
      url: `/v1/users/${target.userId}`,
      headers: admin.headers,
      payload: { name: 'Renamed Elsewhere' },
    });
    expect(patched.statusCode, patched.body).toBe(200);

    expect((await graphqlUser(target.userId, admin.headers))?.firstName).toBe('Renamed');
    const after = await restGet(target.userId, admin.headers);
    expect(((await after.json()) as { name: string }).name).toBe('Renamed Elsewhere');
  });

  it('keeps a cache only where another process’s commit can be noticed', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const kept = await atrium.caller();
    const seen: (string | null)[] = [];
    for (let i = 0; i < 3; i++) seen.push((await restGet(kept.userId, admin.headers)).headers.get('x-cache'));
    expect(seen).toEqual(
      redis || testDialect() === 'sqlite' ? ['MISS', 'HIT', 'HIT'] : ['MISS', 'MISS', 'MISS'],
    );
  });
});
