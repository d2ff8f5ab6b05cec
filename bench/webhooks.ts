/**
 * Webhook delivery benchmark: deliveries per second from the outbox to a loopback receiver, and the
 * outbox lag (event recorded → first attempt started) at a steady event rate, on SQLite and on
 * PostgreSQL. The peer is a bare keep-alive HTTP client posting the same signed bodies to the same
 * receiver with the same concurrency and no database: the ceiling of this machine's loopback.
 *
 * Run alone: `node --import tsx bench/webhooks.ts` (BENCH_WEBHOOK_ENGINES=sqlite,postgres,
 * BENCH_WEBHOOK_DELIVERIES, BENCH_WEBHOOK_RATE, BENCH_WEBHOOK_SECONDS, BENCH_PG_URL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { type Atrium, createAtrium } from '../src/compose.js';
import { parseConfig } from '../src/config/schema.js';
import { SYSTEM_ACTOR } from '../src/domain/actor.js';
import { iso, unixSeconds } from '../src/domain/clock.js';
import { newEventId } from '../src/domain/ids.js';
import { envelopeBody } from '../src/webhooks/event-types.js';
import { webhooksOf } from '../src/webhooks/index.js';
import { signatureHeader } from '../src/webhooks/signing.js';
import { signalOutbox } from '../src/store/outbox-signal.js';
import { startChild, stopChildren } from './child.js';

const DELIVERIES = Number(process.env.BENCH_WEBHOOK_DELIVERIES ?? 5000);
const RATE = Number(process.env.BENCH_WEBHOOK_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_WEBHOOK_SECONDS ?? 5);
const CONCURRENCY = 64;
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ENGINES = (process.env.BENCH_WEBHOOK_ENGINES ?? 'sqlite,postgres').split(',');

/** The receiver runs in its own process so it does not share the worker's event loop. */
const RECEIVER = `
const http = require('node:http');
let n = 0;
const s = http.createServer((req, res) => { req.resume(); req.on('end', () => { n++; res.writeHead(200).end('ok'); }); });
s.keepAliveTimeout = 60000;
s.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: s.address().port })));
`;

function startReceiver(): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout!.once('data', (d: Buffer) => {
      const { port } = JSON.parse(d.toString()) as { port: number };
      resolve({ child, url: `http://127.0.0.1:${port}/hook` });
    });
    child.once('exit', (code) => reject(new Error(`receiver exited ${code}`)));
  });
}

async function freshPostgres(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `atrium_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** The peer: the same bodies and headers, same concurrency, keep-alive, no database. */
async function bareClient(url: string, count: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const body = envelopeBody({
    id: newEventId(),
    type: 'order.created',
    created: 0,
    data: '{"id":"ord_x"}',
    api_version: '2026-11-01',
  });
  let next = 0;
  const started = performance.now();
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(url, {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'x-webhook-signature': signatureHeader(['whsec_bench'], Math.floor(Date.now() / 1000), body),
          'x-webhook-attempt': '1',
        },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        next += 1;
        await one();
      }
    }),
  );
  const elapsed = performance.now() - started;
  agent.destroy();
  return (count / elapsed) * 1000;
}

interface EngineFigures {
  engine: string;
  deliveriesPerSecond: number;
  /** The bare client's req/s, mean of a run just before and one just after the drain. */
  bare: number;
  statementsPerDelivery: number;
  commitsPerDelivery: number | null;
  lagP50: number;
  lagP99: number;
  lagCount: number;
  splitLagP50: number | null;
  splitLagP99: number | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Committed transactions in one PostgreSQL database (the statistics lag up to a second). */
async function commitsOf(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('SELECT pg_stat_clear_snapshot()');
  const r = await c.query<{ n: string }>(
    'SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  await c.end();
  return Number(r.rows[0]!.n);
}

/**
 * Orders made through the core at a steady rate; returns the lag of each one's first attempt
 * (event committed → attempt started), read from the attempt records.
 */
async function measureLag(
  services: Atrium['services'],
  userId: string,
  productId: string,
): Promise<number[]> {
  const actor = { id: userId, kind: 'user' as const, role: 'member' as const };
  const address = { name: 'B', street: '1 Main St', city: 'Springfield', postalCode: '12345', country: 'US' };
  const since = iso(new Date());
  const total = RATE * SECONDS;
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = t0 + (i * 1000) / RATE - performance.now();
    if (wait > 0) await sleep(wait);
    await services.core.orders.create(actor, {
      items: [{ productId, quantity: 1 }],
      currency: 'USD',
      shippingAddress: address,
    });
  }
  const db = services.store.db;
  for (let tries = 0; tries < 100; tries++) {
    const row = await db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('d.status', '=', 'delivered')
      .where('e.created_at', '>=', since)
      .executeTakeFirstOrThrow();
    if (Number(row.n) >= total) break;
    await sleep(100);
  }
  const rows = await db
    .selectFrom('delivery_attempts as a')
    .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select(['a.created_at as attempted', 'e.created_at as recorded'])
    .where('a.attempt', '=', 1)
    .where('e.created_at', '>=', since)
    .execute();
  return rows.map((r) => Date.parse(r.attempted) - Date.parse(r.recorded)).sort((a, b) => a - b);
}

async function benchEngine(engine: string, receiverUrl: string): Promise<EngineFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-webhooks-'));
  const database =
    engine === 'postgres'
      ? await freshPostgres()
      : { url: `sqlite:${join(dir, 'bench.db')}`, drop: async () => undefined };
  try {
    const config = parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url, LOG_LEVEL: 'silent' });
    const api = await createAtrium(config, ['api']);
    const user = await api.services.core.users.create({
      handle: 'hookbench',
      email: 'hookbench@example.com',
    });
    await webhooksOf(api.services).endpoints.create(SYSTEM_ACTOR, { url: receiverUrl, userId: user.id });
    const product = await api.services.core.products.create({ name: 'Bench', priceCents: 1250 });
    await api.close();

    // Phase 1, throughput: a running, idle worker; DELIVERIES events committed in one transaction
    // (with the outbox wake-up every writer sends); the clock runs from that commit until every
    // delivery has its 2xx recorded in the database.
    const worker = await createAtrium(config, ['worker']);
    const db = worker.services.store.db;
    const data = JSON.stringify({ id: 'ord_bench', amount_cents: 2500, currency: 'USD', status: 'PENDING' });
    await sleep(300); // the worker's first pass and its LISTEN are done
    // The peer runs just before and just after the drain, and the figure is their mean, so a change
    // in the machine's load during the run weighs on both sides.
    const bareBefore = await bareClient(receiverUrl, DELIVERIES);
    const statementsBefore = worker.services.store.statementCount();
    const commitsBefore = engine === 'postgres' ? await commitsOf(database.url) : 0;
    let started = 0;
    await db.transaction().execute(async (trx) => {
      for (let i = 0; i < DELIVERIES; i += 500) {
        const now = new Date();
        const rows = Array.from({ length: Math.min(500, DELIVERIES - i) }, () => ({
          id: newEventId(now.getTime()),
          type: 'order.created',
          api_version: '2026-11-01',
          owner_id: user.id,
          data,
          created: unixSeconds(now),
          created_at: iso(now),
          dispatched_at: null,
        }));
        await trx.insertInto('events').values(rows).execute();
      }
      await signalOutbox(trx, worker.services.store.dialect);
      started = performance.now(); // the COMMIT goes out when this callback returns
    });
    worker.services.bus.emit({ kind: 'event.recorded', eventId: 'bench', type: 'order.created' });
    // The poll runs on its own connection: its statements are not the worker's.
    const poll = engine === 'postgres' ? new pg.Client({ connectionString: database.url }) : undefined;
    await poll?.connect();
    let polls = 0;
    for (;;) {
      polls += 1;
      const n = poll
        ? Number(
            (
              await poll.query<{ n: string }>(
                "SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'delivered'",
              )
            ).rows[0]!.n,
          )
        : Number(
            (
              await db
                .selectFrom('webhook_deliveries')
                .select((eb) => eb.fn.countAll<number>().as('n'))
                .where('status', '=', 'delivered')
                .executeTakeFirstOrThrow()
            ).n,
          );
      if (n >= DELIVERIES) break;
      await sleep(10);
    }
    const elapsed = performance.now() - started;
    await poll?.end();
    const statements = worker.services.store.statementCount() - statementsBefore - (poll ? 0 : polls);
    const attempts = await db
      .selectFrom('delivery_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    if (Number(attempts.n) !== DELIVERIES) {
      throw new Error(`expected ${DELIVERIES} attempt records, found ${attempts.n}`);
    }
    const bareAfter = await bareClient(receiverUrl, DELIVERIES);
    await worker.close();
    let commitsPerDelivery: number | null = null;
    if (engine === 'postgres') {
      await sleep(1500); // backends flush their statistics at most once a second
      // Less the bench's own: the events' transaction and the polls.
      const commits = (await commitsOf(database.url)) - commitsBefore - 1 - polls - 1;
      commitsPerDelivery = commits / DELIVERIES;
    }

    // Phase 2, lag: one process with every role, changes made through the core at a steady rate.
    const all = await createAtrium(config, ['api', 'worker']);
    const lags = await measureLag(all.services, user.id, product.id);
    await all.close();

    // Phase 3 (PostgreSQL), lag with the worker in a process of its own, woken by NOTIFY.
    let split: number[] | null = null;
    if (engine === 'postgres') {
      const child = await startChild(
        ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--role', 'worker'],
        { NODE_ENV: 'test', DATABASE_URL: database.url, LOG_LEVEL: 'info' },
        /"atrium started"()/,
      );
      try {
        const apiOnly = await createAtrium(config, ['api']);
        split = await measureLag(apiOnly.services, user.id, product.id);
        await apiOnly.close();
      } finally {
        await stopChildren([child.child]);
      }
    }
    return {
      engine,
      deliveriesPerSecond: (DELIVERIES / elapsed) * 1000,
      bare: (bareBefore + bareAfter) / 2,
      statementsPerDelivery: statements / DELIVERIES,
      commitsPerDelivery,
      lagP50: percentile(lags, 50),
      lagP99: percentile(lags, 99),
      lagCount: lags.length,
      splitLagP50: split ? percentile(split, 50) : null,
      splitLagP99: split ? percentile(split, 99) : null,
    };
  } finally {
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runWebhookBench(): Promise<Array<Record<string, unknown>>> {
  const receiver = await startReceiver();
  try {
    const rows: Array<Record<string, unknown>> = [];
    for (const engine of ENGINES) {
      const f = await benchEngine(engine, receiver.url);
      rows.push({
        engine: f.engine,
        'deliveries/s': Math.round(f.deliveriesPerSecond),
        'bare client req/s': Math.round(f.bare),
        'ratio (deliveries/s)': Number((f.deliveriesPerSecond / f.bare).toFixed(2)),
        'stmts/delivery': Number(f.statementsPerDelivery.toFixed(3)),
        'commits/delivery': f.commitsPerDelivery === null ? '-' : Number(f.commitsPerDelivery.toFixed(3)),
        'lag p50 ms': f.lagP50,
        'lag p99 ms': f.lagP99,
        'lag samples': f.lagCount,
        'split lag p50 ms': f.splitLagP50 ?? '-',
        'split lag p99 ms': f.splitLagP99 ?? '-',
      });
    }
    console.table(rows);
    console.log(
      `webhooks: ${DELIVERIES} events committed at once, timed from the commit to the last 2xx recorded; ` +
        `lag at ${RATE} orders/s for ${SECONDS} s (event committed → first attempt), in one process and ` +
        `(split) with an --role api process and a separate --role worker process`,
    );
    return rows;
  } finally {
    receiver.child.kill('SIGTERM');
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runWebhookBench();
