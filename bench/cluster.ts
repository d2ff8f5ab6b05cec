/**
 * The scale-out benchmark (docs/deployment.md, "Sizing"): GET one order and the GraphQL posts query
 * (bench/graphql.ts's, persisted) through nginx with two api instances against PostgreSQL and Redis,
 * against one api instance measured in the same run, both directly and through nginx. Needs nginx,
 * PostgreSQL and Redis, so `npm run bench` runs it only with BENCH_CLUSTER=1;
 * `node --import tsx bench/cluster.ts` runs it alone.
 *
 * On a 2-core machine the load generator, nginx and every instance share the same two cores, so the
 * two-instance figure measures the cost of the extra hop and processes more than added capacity.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type autocannon from 'autocannon';
import pg from 'pg';
import { Cluster } from '../src/cluster/cluster.js';
import type { LayoutCounts } from '../src/cluster/layout.js';
import { closeServices, createServices } from '../src/compose.js';
import { parseConfig } from '../src/config/schema.js';
import { checkPostsQuery, graphqlLoad, persistedPostsQuery, seedGraphQL } from './graphql.js';
import { type Figure, measure } from './measure.js';

const SECONDS = Number(process.env.BENCH_CLUSTER_SECONDS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const NGINX = process.env.BENCH_NGINX ?? '/usr/sbin/nginx';
const KEYS = 20;

const HOW = { seconds: SECONDS, warmupSeconds: WARMUP, connections: CONNECTIONS };

/** GET with each connection on the next enterprise key: no run comes near a key's hourly limit. */
function getLoad(url: string, keys: string[]): autocannon.Options {
  let next = 0;
  return { url, setupClient: (client) => client.setHeaders({ 'x-api-key': keys[next++ % keys.length]! }) };
}

async function withCluster<T>(
  databaseUrl: string,
  layout: LayoutCounts,
  manifest: string,
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
    env: { NODE_ENV: 'production', LOG_LEVEL: 'warn', PERSISTED_QUERIES_FILE: manifest },
  });
  try {
    return await run(cluster);
  } finally {
    await cluster.stop();
    cluster.removeRunDir();
  }
}

interface Row {
  endpoint: string;
  layout: string;
  figure: Figure;
}

export async function runClusterBench(): Promise<void> {
  const name = `atrium_bench_${randomBytes(4).toString('hex')}`;
  const admin = new URL(ADMIN_URL);
  admin.pathname = `/${name}`;
  const databaseUrl = admin.toString();
  const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-cluster-'));
  const drop = async () => {
    const c = new pg.Client({ connectionString: ADMIN_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  };
  const GET = 'GET /api/v2/orders/{id}';
  const GQL = 'POST /graphql posts query (persisted)';
  try {
    const rows: Row[] = [];
    let path = '';
    const keys: string[] = [];
    let gqlKeys: string[] = [];
    const { manifest, body } = persistedPostsQuery(dir);
    const both = async (layout: string, base: string, direct?: string) => {
      for (const [endpoint, load] of [
        [GET, (url: string) => getLoad(`${url}${path}`, keys)],
        [GQL, (url: string) => graphqlLoad(url, body, gqlKeys)],
      ] as const) {
        if (direct)
          rows.push({
            endpoint,
            layout: `${layout}, direct`,
            figure: await measure(endpoint, load(direct), HOW),
          });
        rows.push({
          endpoint,
          layout: `${layout}, through nginx`,
          figure: await measure(endpoint, load(base), HOW),
        });
      }
    };
    await withCluster(databaseUrl, { api: 1, auth: 0, grpc: 0, worker: 0 }, manifest, async (cluster) => {
      // Data through the core, on the database the instances use: one order, and the GraphQL
      // benchmark's posts, comments and callers.
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
      gqlKeys = await seedGraphQL(databaseUrl);
      path = `/api/v2/orders/${order.id}`;
      const check = await fetch(`${cluster.httpUrl}${path}`, { headers: { 'x-api-key': keys[0]! } });
      if (check.status !== 200) throw new Error(`warm-up failed: ${check.status}`);
      await checkPostsQuery(cluster.httpUrl, body, gqlKeys[0]!);
      await both('1 api instance', cluster.httpUrl, cluster.role('api')[0]!.url);
    });
    await withCluster(databaseUrl, { api: 2, auth: 0, grpc: 0, worker: 0 }, manifest, async (cluster) => {
      await checkPostsQuery(cluster.httpUrl, body, gqlKeys[0]!);
      await both('2 api instances', cluster.httpUrl);
    });
    const table = rows.map((r) => {
      const direct = rows.find((x) => x.endpoint === r.endpoint && x.layout === '1 api instance, direct')!;
      const nginx1 = rows.find(
        (x) => x.endpoint === r.endpoint && x.layout === '1 api instance, through nginx',
      )!;
      return {
        endpoint: r.endpoint,
        layout: r.layout,
        'req/s': Math.round(r.figure.rps),
        'p50 ms': r.figure.p50,
        'p99 ms': r.figure.p99,
        'ratio to 1 direct': Number((r.figure.rps / direct.figure.rps).toFixed(2)),
        'ratio to 1 via nginx': Number((r.figure.rps / nginx1.figure.rps).toFixed(2)),
        'errors/non-2xx': `${r.figure.errors}/${r.figure.non2xx}`,
      };
    });
    console.table(table);
    console.log(
      `cluster bench: ${SECONDS}s per figure after ${WARMUP}s warm-up, ${CONNECTIONS} connections, ` +
        `load generator, nginx and instances on the same machine; load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')}`,
    );
  } finally {
    await drop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await runClusterBench();
