/**
 * The scale-out benchmark (docs/deployment.md, "Sizing"): GET one order through nginx with two api
 * instances against PostgreSQL and Redis, against one api instance measured in the same run, both
 * directly and through nginx. Needs nginx, PostgreSQL and Redis, so `npm run bench` runs it only with
 * BENCH_CLUSTER=1; `node --import tsx bench/cluster.ts` runs it alone.
 *
 * On a 2-core machine the load generator, nginx and every instance share the same two cores, so the
 * two-instance figure measures the cost of the extra hop and processes more than added capacity.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { Cluster } from '../src/cluster/cluster.js';
import type { LayoutCounts } from '../src/cluster/layout.js';
import { closeServices, createServices } from '../src/compose.js';
import { parseConfig } from '../src/config/schema.js';

const SECONDS = Number(process.env.BENCH_CLUSTER_SECONDS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const NGINX = process.env.BENCH_NGINX ?? '/usr/sbin/nginx';
const KEYS = 20;

interface Figure {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function measure(name: string, url: string, keys: string[]): Promise<Figure> {
  let next = 0;
  const opts: autocannon.Options = {
    url,
    connections: CONNECTIONS,
    // Each connection takes the next enterprise key: no run comes near a key's hourly limit.
    setupClient: (client) => client.setHeaders({ 'x-api-key': keys[next++ % keys.length]! }),
  };
  if (WARMUP > 0) await autocannon({ ...opts, duration: WARMUP });
  const r = await autocannon({ ...opts, duration: SECONDS });
  return {
    name,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  };
}

async function withCluster<T>(
  databaseUrl: string,
  layout: LayoutCounts,
  run: (c: Cluster) => Promise<T>,
): Promise<T> {
  const base = 20000 + Math.floor(Math.random() * 20000);
  const cluster = await Cluster.start({
    databaseUrl,
    redisUrl: REDIS_URL,
    layout,
    httpPort: base,
    grpcPort: base + 1,
    basePort: base + 2,
    nginxBinary: NGINX,
    // Production rules, and no access line per request on either side: the figure is the service.
    env: { NODE_ENV: 'production', LOG_LEVEL: 'warn' },
  });
  try {
    return await run(cluster);
  } finally {
    await cluster.stop();
    cluster.removeRunDir();
  }
}

export async function runClusterBench(): Promise<void> {
  const name = `atrium_bench_${randomBytes(4).toString('hex')}`;
  const admin = new URL(ADMIN_URL);
  admin.pathname = `/${name}`;
  const databaseUrl = admin.toString();
  const drop = async () => {
    const c = new pg.Client({ connectionString: ADMIN_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  };
  try {
    const figures: Figure[] = [];
    let path = '';
    const keys: string[] = [];
    await withCluster(databaseUrl, { api: 1, auth: 0, grpc: 0, worker: 0 }, async (cluster) => {
      // Data through the core, on the database the instances use.
      const services = await createServices(
        parseConfig({ NODE_ENV: 'test', DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' }),
        { migrate: false },
      );
      const user = await services.core.users.create({
        handle: 'bench',
        email: 'bench@example.com',
        role: 'member',
      });
      for (let i = 0; i < KEYS; i++)
        keys.push((await services.apiKeys.create({ userId: user.id, tier: 'enterprise' })).key);
      const product = await services.core.products.create({ name: 'Bench widget', priceCents: 1250 });
      const order = await services.core.orders.create(
        { id: user.id, kind: 'user', role: user.role },
        {
          items: [{ productId: product.id, quantity: 2 }],
          currency: 'USD',
          shippingAddress: {
            name: 'Bench',
            street: '1 Main St',
            city: 'Springfield',
            postalCode: '12345',
            country: 'US',
          },
        },
      );
      await closeServices(services);
      path = `/api/v2/orders/${order.id}`;
      const direct = cluster.role('api')[0]!.url;
      const check = await fetch(`${cluster.httpUrl}${path}`, { headers: { 'x-api-key': keys[0]! } });
      if (check.status !== 200) throw new Error(`warm-up failed: ${check.status}`);
      figures.push(await measure('1 api instance, direct', `${direct}${path}`, keys));
      figures.push(await measure('1 api instance, through nginx', `${cluster.httpUrl}${path}`, keys));
    });
    await withCluster(databaseUrl, { api: 2, auth: 0, grpc: 0, worker: 0 }, async (cluster) => {
      figures.push(await measure('2 api instances, through nginx', `${cluster.httpUrl}${path}`, keys));
    });
    const one = figures[0]!.rps;
    console.table(
      figures.map((f) => ({
        'GET /api/v2/orders/{id} (PostgreSQL + Redis)': f.name,
        'req/s': Math.round(f.rps),
        'p50 ms': f.p50,
        'p99 ms': f.p99,
        'ratio to 1 direct': Number((f.rps / one).toFixed(2)),
        'errors/non-2xx': `${f.errors}/${f.non2xx}`,
      })),
    );
    console.log(
      `cluster bench: ${SECONDS}s per figure after ${WARMUP}s warm-up, ${CONNECTIONS} connections, ` +
        `load generator, nginx and instances on the same machine; load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')}`,
    );
  } finally {
    await drop().catch(() => undefined);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await runClusterBench();
