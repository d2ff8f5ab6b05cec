/**
 * `npm run bench`: Atrium's REST hot paths against a bare Fastify baseline, measured in the same run
 * on the same machine. Servers run in child processes so the load generator does not share their
 * event loop. Prints requests/s, p50 and p99 for each, and the ratio to the baseline.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type autocannon from 'autocannon';
import { startChild, stopChildren } from './child.js';
import { type Figure, measure, type MeasureOptions } from './measure.js';
import { parseConfig } from '../src/config/schema.js';
import { closeServices, createServices } from '../src/compose.js';
import { benchGrpc } from './grpc.js';
import { runWebhookBench } from './webhooks.js';
import { benchGraphQL } from './graphql.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 2000);
/**
 * Enterprise keys of the one bench user, used in turn. One key allows 100,000 requests an hour,
 * fewer than a fast run sends (warm-ups included), and 429s would flatter nothing; every request
 * still goes through the key lookup and the rate limiter.
 */
const KEYS = Number(process.env.BENCH_KEYS ?? 20);

const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);

const load = (name: string, opts: autocannon.Options, how: Partial<MeasureOptions> = {}): Promise<Figure> =>
  measure(name, opts, { seconds: DURATION, warmupSeconds: WARMUP, connections: CONNECTIONS, ...how });

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-'));
  const databaseUrl = `sqlite:${join(dir, 'bench.db')}`;
  const children: ChildProcess[] = [];
  try {
    // Prepare data through the core, as a real deployment would hold it.
    const services = await createServices(
      parseConfig({ NODE_ENV: 'test', DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' }),
    );
    const user = await services.core.users.create({
      handle: 'bench',
      email: 'bench@example.com',
      role: 'member',
    });
    const keys: string[] = [];
    for (let i = 0; i < KEYS; i++)
      keys.push((await services.apiKeys.create({ userId: user.id, tier: 'enterprise', mode: 'test' })).key);
    const product = await services.core.products.create({ name: 'Bench widget', priceCents: 1250 });
    const actor = { id: user.id, kind: 'user' as const, role: user.role };
    const address = {
      name: 'Bench',
      street: '1 Main St',
      city: 'Springfield',
      postalCode: '12345',
      country: 'US',
    };
    let lastOrderId = '';
    for (let i = 0; i < ORDERS; i++) {
      const order = await services.core.orders.create(actor, {
        items: [{ productId: product.id, quantity: 2 }],
        currency: 'USD',
        shippingAddress: address,
      });
      lastOrderId = order.id;
    }
    // The same order as a REST client sends it.
    const input = {
      items: [{ product_id: product.id, quantity: 2 }],
      currency: 'USD',
      shipping_address: {
        name: 'Bench',
        street: '1 Main St',
        city: 'Springfield',
        postal_code: '12345',
        country: 'US',
      },
    };
    await closeServices(services);

    const atrium = await startChild(
      ['bin/atrium.js', 'serve', '--role', 'api'],
      { DATABASE_URL: databaseUrl, PORT: '0', LOG_LEVEL: 'info', NODE_ENV: 'production' },
      /"http":"(http:\/\/[^"]+)"/,
    );
    children.push(atrium.child);
    const headers = { 'x-api-key': keys[0]!, 'content-type': 'application/json' };
    let nextKey = 0;
    // Each connection takes the next key (set once, so autocannon still sends prebuilt requests).
    const rotatingKeys: Pick<autocannon.Options, 'setupClient'> = {
      setupClient: (client) => client.setHeaders({ ...headers, 'x-api-key': keys[nextKey++ % keys.length]! }),
    };
    const one = await fetch(`${atrium.url}/api/v2/orders/${lastOrderId}`, { headers });
    const list = await fetch(`${atrium.url}/api/v2/orders?limit=20`, { headers });
    if (one.status !== 200 || list.status !== 200)
      throw new Error(`warm-up failed: ${one.status} ${list.status}`);
    const oneBody = await one.text();
    const listBody = await list.text();

    const baseline = await startChild(
      ['--import', 'tsx', 'bench/baseline-server.ts'],
      { BASELINE_BODY: oneBody, BASELINE_LIST: listBody },
      /"url":"(http:\/\/[^"]+)"/,
    );
    children.push(baseline.child);

    const body = JSON.stringify(input);
    const figures: Array<{ atrium: Figure; baseline: Figure }> = [];
    figures.push({
      baseline: await load('baseline GET one', { url: `${baseline.url}/order` }),
      atrium: await load('GET /api/v2/orders/{id}', {
        url: `${atrium.url}/api/v2/orders/${lastOrderId}`,
        headers,
        ...rotatingKeys,
      }),
    });
    figures.push({
      baseline: await load('baseline GET list', { url: `${baseline.url}/orders` }),
      atrium: await load('GET /api/v2/orders?limit=20', {
        url: `${atrium.url}/api/v2/orders?limit=20`,
        headers,
        ...rotatingKeys,
      }),
    });
    figures.push({
      baseline: await load('baseline POST', {
        url: `${baseline.url}/orders`,
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      }),
      atrium: await load('POST /api/v2/orders', {
        url: `${atrium.url}/api/v2/orders`,
        method: 'POST',
        body,
        headers,
        ...rotatingKeys,
      }),
    });

    const rows = figures.map(({ atrium: a, baseline: b }) => ({
      endpoint: a.name,
      'req/s': Math.round(a.rps),
      'p50 ms': a.p50,
      'p99 ms': a.p99,
      'baseline req/s': Math.round(b.rps),
      'baseline p50 ms': b.p50,
      'baseline p99 ms': b.p99,
      'ratio (req/s)': Number((a.rps / b.rps).toFixed(2)),
      'errors/non-2xx': `${a.errors}/${a.non2xx}`,
    }));
    console.table(rows);
    // Each later stage starts its own server on the same SQLite file, which one process holds.
    await stopChildren(children);
    // gRPC GetUser against a bare grpc-js server (bench/grpc.ts), on the same database.
    const grpcRow = await benchGrpc({
      databaseUrl,
      durationSeconds: DURATION,
      warmupSeconds: WARMUP,
      connections: CONNECTIONS,
    });
    console.table([grpcRow]);
    const graphql = await benchGraphQL({
      root,
      dir,
      databaseUrl,
      children,
      startChild,
      load,
      seconds: DURATION,
    });
    const results = join(root, 'bench', 'results');
    mkdirSync(results, { recursive: true });
    const record = {
      at: new Date().toISOString(),
      node: process.version,
      duration_s: DURATION,
      connections: CONNECTIONS,
      orders: ORDERS,
      rows,
      grpc: grpcRow,
      graphql,
    };
    writeFileSync(join(results, 'latest.json'), `${JSON.stringify(record, null, 2)}\n`);
    console.log(`written bench/results/latest.json (${DURATION}s per endpoint, ${CONNECTIONS} connections)`);
  } finally {
    await stopChildren(children);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
// Webhook deliveries/s and outbox lag (bench/webhooks.ts); BENCH_WEBHOOKS=0 skips it.
if (process.env.BENCH_WEBHOOKS !== '0') await runWebhookBench();

// Scale-out figures need nginx, PostgreSQL and Redis: opt in (docs/deployment.md, "Sizing").
if (process.env.BENCH_CLUSTER === '1') await (await import('./cluster.js')).runClusterBench();
