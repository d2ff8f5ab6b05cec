/**
 * What gRPC health's readiness probe costs the process: `checkReadiness` with the grpc role's
 * checks (src/process/readiness.ts), as `Health.follow` runs it every DEFAULT_HEALTH_PROBE_MS,
 * timed in a loop on SQLite and, when it answers, PostgreSQL. Not part of `npm run bench`: the
 * figure is per probe and does not depend on load. Alone:
 *   node --import tsx bench/health-probe.ts
 * PROBE_DATABASE_URL names the PostgreSQL server (postgres://postgres@127.0.0.1:5432/postgres).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeServices, createServices } from '../src/compose.js';
import { parseConfig } from '../src/config/schema.js';
import { DEFAULT_HEALTH_PROBE_MS } from '../src/grpc/server.js';
import { checkReadiness, checksFor } from '../src/process/readiness.js';

const WARMUP = 200;
const PROBES = 2000;

async function perProbe(databaseUrl: string): Promise<{ cpuUs: number; wallUs: number }> {
  const services = await createServices(
    parseConfig({ NODE_ENV: 'test', DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' }),
  );
  try {
    const checks = checksFor(services.readiness, ['grpc']);
    const probe = async () => {
      const { ready } = await checkReadiness(checks, () => false);
      if (!ready) throw new Error(`not ready: ${databaseUrl}`);
    };
    for (let i = 0; i < WARMUP; i++) await probe();
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < PROBES; i++) await probe();
    const used = process.cpuUsage(cpu);
    return {
      cpuUs: (used.user + used.system) / PROBES,
      wallUs: ((performance.now() - started) * 1000) / PROBES,
    };
  } finally {
    await closeServices(services);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-probe-'));
const rows: Record<string, string | number>[] = [];
try {
  const targets: [string, string][] = [
    ['SQLite', `sqlite:${join(dir, 'probe.db')}`],
    ['PostgreSQL', process.env.PROBE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'],
  ];
  for (const [engine, url] of targets) {
    try {
      const { cpuUs, wallUs } = await perProbe(url);
      const perMinute = 60_000 / DEFAULT_HEALTH_PROBE_MS;
      rows.push({
        engine,
        'cpu µs/probe': Number(cpuUs.toFixed(1)),
        'wall µs/probe': Number(wallUs.toFixed(1)),
        'cpu ms/minute': Number(((cpuUs * perMinute) / 1000).toFixed(2)),
        '% of a core': Number(((cpuUs * perMinute) / 600_000).toFixed(4)),
      });
    } catch (err) {
      rows.push({ engine, error: (err as Error).message });
    }
  }
  console.table(rows);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
