/**
 * The gRPC benchmark: Atrium's GetUser (API key in metadata, rate limiter, a database read, a log
 * line and metrics per call) against a bare grpc-js server answering a constant User from memory
 * (bench/grpc-baseline-server.ts), measured in the same run with the same load generator.
 *
 * Called by bench/run.ts (`npm run bench`), or alone after `npm run build`:
 *   node --import tsx bench/grpc.ts
 *
 * The load generator is grpc-js in this process: BENCH_CONNECTIONS channels (each its own HTTP/2
 * connection), each keeping one call in flight, for a warm-up and then BENCH_SECONDS.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { parseConfig } from '../src/config/schema.js';
import { closeServices, createServices } from '../src/compose.js';
import { UserServiceClient, type User } from '../src/grpc/gen/users/v1/users.gen.js';

const root = fileURLToPath(new URL('..', import.meta.url));

export interface GrpcBenchOptions {
  databaseUrl: string;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
}

export interface GrpcFigure {
  endpoint: string;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  'baseline req/s': number;
  'baseline p50 ms': number;
  'baseline p99 ms': number;
  'ratio (req/s)': number;
  errors: number;
}

function startChild(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; address: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (!m) return;
      clearTimeout(timer);
      // Drained and dropped from here on, as a log shipper would take it.
      child.stdout!.off('data', onData).on('data', () => undefined);
      child.stderr!.off('data', onData).on('data', () => undefined);
      resolve({ child, address: m[1]! });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Keeps `connections` calls in flight for `seconds`; latencies in ms. */
async function drive(
  address: string,
  metadata: Metadata[],
  userId: string,
  seconds: number,
  connections: number,
): Promise<Run> {
  const clients = Array.from(
    { length: connections },
    // A local subchannel pool gives every client its own connection, as autocannon's connections are.
    () =>
      new UserServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }),
  );
  const latencies: number[] = [];
  let errors = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    clients.map(async (client, i) => {
      const md = metadata[i % metadata.length]!;
      while (performance.now() < until) {
        const started = performance.now();
        await new Promise<void>((resolve) =>
          client.getUser({ userId }, md, (err: ServiceError | null) => {
            if (err) errors += 1;
            else latencies.push(performance.now() - started);
            resolve();
          }),
        );
      }
    }),
  );
  for (const c of clients) c.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    Number((latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0).toFixed(2));
  return { rps: latencies.length / seconds, p50: at(0.5), p99: at(0.99), errors };
}

async function measure(
  address: string,
  metadata: Metadata[],
  userId: string,
  options: GrpcBenchOptions,
): Promise<Run> {
  if (options.warmupSeconds > 0)
    await drive(address, metadata, userId, options.warmupSeconds, options.connections);
  return drive(address, metadata, userId, options.durationSeconds, options.connections);
}

/** Runs the gRPC GetUser comparison against a database prepared here; returns one table row. */
export async function benchGrpc(options: GrpcBenchOptions): Promise<GrpcFigure> {
  const services = await createServices(
    parseConfig({ NODE_ENV: 'test', DATABASE_URL: options.databaseUrl, LOG_LEVEL: 'silent' }),
  );
  const user = await services.core.users.create({
    handle: `grpcbench${Date.now().toString(36)}`,
    email: `grpcbench${Date.now().toString(36)}@example.com`,
    name: 'Bench User',
    role: 'member',
  });
  // One enterprise key per connection: each allows 100,000 calls an hour, and no call may be a 429.
  const metadata: Metadata[] = [];
  for (let i = 0; i < options.connections; i++) {
    const { key } = await services.apiKeys.create({ userId: user.id, tier: 'enterprise', mode: 'test' });
    const md = new Metadata();
    md.set('x-api-key', key);
    metadata.push(md);
  }
  await closeServices(services);

  const children: ChildProcess[] = [];
  try {
    const atrium = await startChild(
      ['bin/atrium.js', 'serve', '--role', 'grpc'],
      { DATABASE_URL: options.databaseUrl, GRPC_PORT: '0', LOG_LEVEL: 'info', NODE_ENV: 'production' },
      /"grpc":"([^"]+)"/,
    );
    children.push(atrium.child);
    const constant = await new Promise<User>((resolve, reject) =>
      new UserServiceClient(atrium.address, credentials.createInsecure()).getUser(
        { userId: user.id },
        metadata[0]!,
        (err, value) => (err ? reject(err) : resolve(value)),
      ),
    );
    const baseline = await startChild(
      ['--import', 'tsx', 'bench/grpc-baseline-server.ts'],
      { BASELINE_USER: JSON.stringify(constant) },
      /"grpc":"([^"]+)"/,
    );
    children.push(baseline.child);

    const base = await measure(baseline.address, [new Metadata()], user.id, options);
    const real = await measure(atrium.address, metadata, user.id, options);
    return {
      endpoint: 'gRPC GetUser',
      'req/s': Math.round(real.rps),
      'p50 ms': real.p50,
      'p99 ms': real.p99,
      'baseline req/s': Math.round(base.rps),
      'baseline p50 ms': base.p50,
      'baseline p99 ms': base.p99,
      'ratio (req/s)': Number((real.rps / base.rps).toFixed(2)),
      errors: real.errors + base.errors,
    };
  } finally {
    for (const c of children) c.kill('SIGTERM');
  }
}

// Alone: `node --import tsx bench/grpc.ts` (after npm run build).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-bench-grpc-'));
  try {
    const row = await benchGrpc({
      databaseUrl: `sqlite:${join(dir, 'bench.db')}`,
      durationSeconds: Number(process.env.BENCH_SECONDS ?? 10),
      warmupSeconds: Number(process.env.BENCH_WARMUP_SECONDS ?? 2),
      connections: Number(process.env.BENCH_CONNECTIONS ?? 10),
    });
    console.table([row]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
