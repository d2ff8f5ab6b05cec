import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForOk } from '../../../src/cluster/child.js';
import { ensureBuilt } from '../../helpers/build.js';
import { runBuiltCliBounded } from '../../helpers/cli.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import {
  freePorts,
  freeRun,
  missingPrerequisite,
  NGINX,
  OwnRedis,
  REDIS_SERVER,
  refusal,
} from './support.js';

/**
 * `atrium cluster` checks Redis before it starts anything, as it checks the database: every process
 * it runs answers /readyz 503 without Redis, so a cluster on a Redis that does not answer would
 * never be ready. Until 2026-11-29 an unreachable Redis was let through: the command printed
 * nothing for 60 s, then exited 1 with `auth-1 did not become ready: ... (status 503)`, never
 * naming Redis.
 */

const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

describe('atrium cluster checks Redis before it starts a process', { timeout: 90_000 }, () => {
  let skip: string | undefined;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  const names: string[] = [];
  beforeAll(async () => {
    skip = await missingPrerequisite();
    if (skip) return;
    ensureBuilt();
    await admin.connect();
  });
  afterAll(async () => {
    if (skip) return;
    for (const name of names) await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  });

  /** Runs `atrium cluster` against the real PostgreSQL (a database of its own) and `env`. */
  async function cluster(args: string[], env: Record<string, string>) {
    const [httpPort, grpcPort] = await freePorts(2);
    const base = await freeRun(6);
    const name = `atrium_redis_check_${process.pid}_${names.length}`;
    names.push(name);
    const started = Date.now();
    // Bounded well under the 60 s a process is given to be ready: a start that waits for one fails here.
    const result = await runBuiltCliBounded(
      ['cluster', ...args],
      {
        CLUSTER_HTTP_PORT: String(httpPort),
        CLUSTER_GRPC_PORT: String(grpcPort),
        CLUSTER_BASE_PORT: String(base),
        CLUSTER_DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${name}`,
        CLUSTER_NGINX: NGINX ?? '/usr/sbin/nginx',
        LOG_LEVEL: 'warn',
        ...env,
      },
      30_000,
    );
    return { result, ms: Date.now() - started };
  }

  it('refuses a Redis nobody listens for at once, naming CLUSTER_REDIS_URL and ECONNREFUSED, flag or variable', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    const [closed] = await freePorts(1);
    const url = `redis://:secret@127.0.0.1:${closed}`;
    const runs = await Promise.all([
      cluster([], { CLUSTER_REDIS_URL: url }),
      cluster(['--redis-url', url], {}),
    ]);
    for (const { result, ms } of runs) {
      const line = refusal(result);
      expect(line, result.stderr).toMatchObject({
        code: 1,
        error: 'invalid_configuration',
        variable: 'CLUSTER_REDIS_URL',
      });
      expect(line.message).toContain('ECONNREFUSED');
      expect(line.message).toContain(`127.0.0.1:${closed}`);
      expect(line.message).not.toContain('secret');
      expect(ms).toBeLessThan(15_000);
    }
  });

  it.skipIf(!REDIS_SERVER)(
    'refuses a Redis that takes connections but answers nothing, saying so',
    async ({ skip: skipIt }) => {
      if (skip) skipIt();
      const hung = await OwnRedis.start();
      try {
        hung.freeze();
        const { result, ms } = await cluster([], { CLUSTER_REDIS_URL: hung.url });
        const line = refusal(result);
        expect(line, result.stderr).toMatchObject({ code: 1, variable: 'CLUSTER_REDIS_URL' });
        expect(line.message).toMatch(/no answer within \d+ ms/);
        expect(ms).toBeLessThan(20_000);
      } finally {
        await hung.stop();
      }
    },
  );

  it('refuses a database index the server does not have, in its own words', async ({ skip: skipIt }) => {
    if (skip) skipIt();
    const { result } = await cluster([], { CLUSTER_REDIS_URL: `${TEST_REDIS_URL.replace(/\/\d*$/, '')}/99` });
    const line = refusal(result);
    expect(line, result.stderr).toMatchObject({ code: 1, variable: 'CLUSTER_REDIS_URL' });
    expect(line.message).toContain('SELECT 99');
  });
});

describe('a process that does not become ready', () => {
  it("is reported with its /readyz answer's body, which names the failing dependency", async () => {
    const body = JSON.stringify({ status: 'not_ready', checks: { database: 'ok', redis: 'unavailable' } });
    const server = createServer((_req, res) =>
      res.writeHead(503, { 'content-type': 'application/json' }).end(body),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      await expect(waitForOk(`http://127.0.0.1:${port}/readyz`, 300, () => true)).rejects.toThrow(
        `did not answer 200 within 300 ms (status 503: ${body})`,
      );
    } finally {
      server.close();
    }
  });
});
