import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../../src/cluster/cluster.js';
import { runCli } from '../../helpers/cli.js';
import { freshDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { ensureBuilt } from '../../helpers/build.js';
import { freePorts, missingPrerequisite, NGINX } from './support.js';

const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** The one JSON line a refused `atrium cluster` writes on stderr. */
function refusal(result: { code: number | null; stdout: string; stderr: string }) {
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(result.stdout).toBe('');
  return {
    code: result.code,
    ...(JSON.parse(lines[0]!) as { error: string; variable?: string; message: string }),
  };
}

// Nothing listens on port 1: a check that reached the database would fail there, not where asked.
const UNREACHABLE_DB = 'postgres://postgres@127.0.0.1:1/x';

describe(
  'atrium cluster refuses a plan that cannot work before it starts anything',
  { timeout: 60_000 },
  () => {
    it('two of its own listeners on one port, naming both settings', async () => {
      const [base] = await freePorts(1);
      // auth-1 is base + 2 in the reference layout; nginx's HTTP listener asked for the same port.
      const overlap = refusal(
        await runCli(
          [
            'cluster',
            '--base-port',
            String(base),
            '--http-port',
            String(base! + 2),
            '--database-url',
            UNREACHABLE_DB,
          ],
          {},
        ),
      );
      expect(overlap).toMatchObject({
        code: 1,
        error: 'invalid_configuration',
        variable: 'CLUSTER_BASE_PORT',
      });
      expect(overlap.message).toContain('CLUSTER_HTTP_PORT');
      expect(overlap.message).toContain('auth-1');
      const same = refusal(
        await runCli(
          [
            'cluster',
            '--http-port',
            String(base),
            '--grpc-port',
            String(base),
            '--database-url',
            UNREACHABLE_DB,
          ],
          {},
        ),
      );
      expect(same).toMatchObject({ code: 1, error: 'invalid_configuration', variable: 'CLUSTER_GRPC_PORT' });
      expect(same.message).toContain('CLUSTER_HTTP_PORT');
    });

    it('a base port that runs past 65535', async () => {
      const over = refusal(
        await runCli(['cluster', '--base-port', '65500', '--database-url', UNREACHABLE_DB], {}),
      );
      expect(over).toMatchObject({ code: 1, error: 'invalid_configuration', variable: 'CLUSTER_BASE_PORT' });
      expect(over.message).toContain('65535');
    });
  },
);

describe('atrium cluster with its processes', { timeout: 240_000 }, () => {
  let skip: string | undefined;
  let dir: string;
  beforeAll(async () => {
    skip = await missingPrerequisite();
    dir = mkdtempSync(join(tmpdir(), 'atrium-cluster-command-'));
    if (!skip) ensureBuilt();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is not ready while something other than its nginx answers on the HTTP port', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    const [httpPort, grpcPort, api] = await freePorts(3);
    // A stand-in for nginx that answers /healthz 200 itself, as a backend on that port would.
    const fake = join(dir, 'not-nginx');
    writeFileSync(
      fake,
      `#!/bin/sh\nexec ${process.execPath} -e 'require("node:http").createServer((q, r) => r.end("ok")).listen(${httpPort}, "127.0.0.1")'\n`,
    );
    chmodSync(fake, 0o755);
    const database = await freshDatabase({ adminUrl: ADMIN_URL });
    try {
      const started = Cluster.start({
        databaseUrl: database.url,
        redisUrl: TEST_REDIS_URL,
        layout: { api: 1, auth: 0, grpc: 0, worker: 0 },
        httpPort: httpPort!,
        grpcPort: grpcPort!,
        ports: [api!],
        nginxBinary: fake,
        env: { LOG_LEVEL: 'warn' },
      });
      await expect(started).rejects.toThrow(/without nginx's Server header/);
    } finally {
      await database.drop();
    }
  });

  it('is ready through its real nginx', async ({ skip: skipIt }) => {
    if (skip) skipIt();
    const [httpPort, grpcPort, api] = await freePorts(3);
    const database = await freshDatabase({ adminUrl: ADMIN_URL });
    const cluster = await Cluster.start({
      databaseUrl: database.url,
      redisUrl: TEST_REDIS_URL,
      layout: { api: 1, auth: 0, grpc: 0, worker: 0 },
      httpPort: httpPort!,
      grpcPort: grpcPort!,
      ports: [api!],
      nginxBinary: NGINX,
      env: { LOG_LEVEL: 'warn' },
    });
    try {
      expect((await fetch(`${cluster.httpUrl}/healthz`)).headers.get('server')).toBe('nginx');
    } finally {
      await cluster.stop();
      cluster.removeRunDir();
      await database.drop();
    }
  });
});
