import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  initdbMissing,
  missingPrerequisite,
  OwnPostgres,
  OwnRedis,
  startTestCluster,
  type TestCluster,
} from './support.js';

/**
 * PostgreSQL restarted under the cluster (a server of this file's own, stopped with a fast
 * shutdown and started again): requests meanwhile fail cleanly with 503, readiness goes false
 * then true, and the same processes serve again without being restarted.
 */
const skip = (await missingPrerequisite()) ?? initdbMissing();

describe.skipIf(skip !== undefined)('the cluster when PostgreSQL restarts', { timeout: 120_000 }, () => {
  let pg: OwnPostgres;
  let redis: OwnRedis;
  let env: TestCluster;

  beforeAll(async () => {
    pg = await OwnPostgres.start();
    redis = await OwnRedis.start();
    env = await startTestCluster({
      layout: { api: 2, auth: 0, grpc: 0, worker: 0 },
      redisUrl: redis.url,
      databaseUrl: pg.databaseUrl('atrium'),
    });
  }, 300_000);

  afterAll(async () => {
    await env?.stop();
    await redis?.stop();
    await pg?.remove();
  }, 60_000);

  it('answers 503 (never 500) while it is down, goes unready, and recovers without a process restart', async () => {
    const handle = `pg${Date.now().toString(36)}`;
    const user = await env.services.core.users.create({
      handle,
      email: `${handle}@example.com`,
      name: 'Restart Test',
      role: 'member',
    });
    const { key } = await env.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
    const headers = { 'x-api-key': key };
    const [api1, api2] = env.cluster.role('api').map((p) => p.url) as [string, string];
    const pids = env.cluster.processes.map((p) => p.child.pid);
    const read = (base: string) => fetch(`${base}/v1/users/${user.id}`, { headers });
    expect((await read(env.cluster.httpUrl)).status).toBe(200);

    // Requests keep flowing while the server stops, so some are in flight when it goes.
    const statuses: number[] = [];
    const bodies: string[] = [];
    let running = true;
    const traffic = (async () => {
      while (running) {
        const answers = await Promise.all([read(api1), read(api2), read(env.cluster.httpUrl)]);
        for (const res of answers) {
          statuses.push(res.status);
          if (res.status !== 200) bodies.push(await res.text());
          else await res.arrayBuffer();
        }
      }
    })();

    await pg.stop();
    const down = await read(api1);
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
    const body = (await down.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ error: 'service_unavailable', details: [] });
    expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|postgres|terminat/i);
    const write = await fetch(`${api2}/v1/users/${user.id}`, {
      method: 'PATCH',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Never Written' }),
    });
    expect([write.status]).toEqual([503]);
    for (const base of [api1, api2]) {
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { checks: Record<string, string> }).checks.database).toBe(
        'unavailable',
      );
    }

    await new Promise((r) => setTimeout(r, 1000));
    await pg.resume();
    const deadline = Date.now() + 20_000;
    for (const base of [api1, api2]) {
      while ((await fetch(`${base}/readyz`)).status !== 200) {
        if (Date.now() > deadline) throw new Error(`${base} did not become ready again`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    running = false;
    await traffic;

    expect(new Set(statuses)).toEqual(new Set([200, 503]));
    for (const b of bodies) expect(JSON.parse(b)).toMatchObject({ error: 'service_unavailable' });
    for (const base of [api1, api2, env.cluster.httpUrl]) {
      const res = await read(base);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe('Restart Test');
    }
    // The same processes, never restarted.
    expect(env.cluster.processes.map((p) => p.child.pid)).toEqual(pids);
    expect(env.cluster.processes.every((p) => p.child.running)).toBe(true);
  });
});
