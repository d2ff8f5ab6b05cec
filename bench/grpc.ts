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
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { parseConfig } from '../src/config/schema.js';
import { closeServices, createServices } from '../src/compose.js';
import { UserServiceClient, type User } from '../src/grpc/gen/users/v1/users.gen.js';
import { startChild as startServer, stopChildren } from './child.js';

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
  /** CPU time per call of each process (Linux /proc; absent elsewhere): what load does not change. */
  'cpu µs/call'?: number;
  'baseline cpu µs/call'?: number;
  'client cpu µs/call (atrium, baseline)'?: string;
  errors: number;
}

/** The shared launcher, naming the captured gRPC address for what it is. */
async function startChild(args: string[], env: Record<string, string>, ready: RegExp) {
  const { child, url } = await startServer(args, env, ready);
  return { child, address: url };
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU µs per answered call: the server's, the load generator's. */
  serverCpu: number | undefined;
  clientCpu: number;
}

interface Sample {
  latencies: number[];
  seconds: number;
  errors: number;
  serverCpuUs: number | undefined;
  clientCpuUs: number;
}

/** A process's user+system CPU time so far in µs, from /proc (Linux); undefined elsewhere. */
function cpuOf(pid: number | undefined): number | undefined {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return undefined;
  }
}

const clientCpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** Keeps `connections` calls in flight for `seconds`; latencies in ms. */
async function drive(
  address: string,
  metadata: Metadata[],
  userId: string,
  seconds: number,
  connections: number,
  pid?: number,
): Promise<Sample> {
  const clients = Array.from(
    { length: connections },
    // A local subchannel pool gives every client its own connection, as autocannon's connections are.
    () =>
      new UserServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }),
  );
  const latencies: number[] = [];
  let errors = 0;
  const serverBefore = cpuOf(pid);
  const clientBefore = clientCpu();
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
  const clientCpuUs = clientCpu() - clientBefore;
  const serverAfter = cpuOf(pid);
  for (const c of clients) c.close();
  const serverCpuUs =
    serverBefore === undefined || serverAfter === undefined ? undefined : serverAfter - serverBefore;
  return { latencies, seconds, errors, serverCpuUs, clientCpuUs };
}

function summarise(samples: Sample[]): Run {
  const latencies = samples.flatMap((x) => x.latencies).sort((a, b) => a - b);
  const seconds = samples.reduce((n, x) => n + x.seconds, 0);
  const at = (q: number) =>
    Number((latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0).toFixed(2));
  const calls = Math.max(1, latencies.length);
  const serverCpu = samples.some((x) => x.serverCpuUs === undefined)
    ? undefined
    : samples.reduce((n, x) => n + x.serverCpuUs!, 0) / calls;
  return {
    rps: latencies.length / seconds,
    p50: at(0.5),
    p99: at(0.99),
    errors: samples.reduce((n, x) => n + x.errors, 0),
    serverCpu,
    clientCpu: samples.reduce((n, x) => n + x.clientCpuUs, 0) / calls,
  };
}

/**
 * Baseline and Atrium in alternating slices (ROUNDS of each, BENCH_SECONDS in all per server), so a
 * change in the machine's load during the run weighs on both alike: the ratio is what is reported.
 */
const ROUNDS = Number(process.env.BENCH_GRPC_ROUNDS ?? 4);

type Target = { address: string; metadata: Metadata[]; pid: number | undefined };

async function measureBoth(
  baseline: Target,
  atrium: Target,
  userId: string,
  options: GrpcBenchOptions,
): Promise<{ base: Run; real: Run }> {
  if (options.warmupSeconds > 0) {
    await drive(baseline.address, baseline.metadata, userId, options.warmupSeconds, options.connections);
    await drive(atrium.address, atrium.metadata, userId, options.warmupSeconds, options.connections);
  }
  const base: Sample[] = [];
  const real: Sample[] = [];
  const slice = options.durationSeconds / ROUNDS;
  for (let r = 0; r < ROUNDS; r++) {
    const { connections } = options;
    base.push(await drive(baseline.address, baseline.metadata, userId, slice, connections, baseline.pid));
    real.push(await drive(atrium.address, atrium.metadata, userId, slice, connections, atrium.pid));
  }
  return { base: summarise(base), real: summarise(real) };
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
      {
        DATABASE_URL: options.databaseUrl,
        GRPC_PORT: '0',
        PORT: '0',
        LOG_LEVEL: 'info',
        NODE_ENV: 'production',
      },
      /"grpc":"([^"]+)"/,
    );
    children.push(atrium.child);
    // One setup client, closed before measuring: its channel would otherwise stay open beside the load.
    const setup = new UserServiceClient(atrium.address, credentials.createInsecure());
    if (process.env.BENCH_GRPC_WRITE_FIRST !== '0') {
      // A serving process has answered writes too: UpdateUser runs in a request scope, whose
      // AsyncLocalStorage costs every promise of the process while it is enabled. One update
      // (changing nothing) checks that it is off again once the write is over;
      // BENCH_GRPC_WRITE_FIRST=0 measures a process that has only ever read.
      await new Promise<void>((resolve, reject) =>
        setup.updateUser(
          { userId: user.id, name: 'Bench User', email: '', role: '', updateMask: ['name'] },
          metadata[0]!,
          (err) => (err ? reject(err) : resolve()),
        ),
      );
    }
    const constant = await new Promise<User>((resolve, reject) =>
      setup.getUser({ userId: user.id }, metadata[0]!, (err, value) => (err ? reject(err) : resolve(value))),
    );
    setup.close();
    const baseline = await startChild(
      ['--import', 'tsx', 'bench/grpc-baseline-server.ts'],
      { BASELINE_USER: JSON.stringify(constant) },
      /"grpc":"([^"]+)"/,
    );
    children.push(baseline.child);

    const { base, real } = await measureBoth(
      { address: baseline.address, metadata: [new Metadata()], pid: baseline.child.pid },
      { address: atrium.address, metadata, pid: atrium.child.pid },
      user.id,
      options,
    );
    return {
      endpoint: 'gRPC GetUser',
      'req/s': Math.round(real.rps),
      'p50 ms': real.p50,
      'p99 ms': real.p99,
      'baseline req/s': Math.round(base.rps),
      'baseline p50 ms': base.p50,
      'baseline p99 ms': base.p99,
      'ratio (req/s)': Number((real.rps / base.rps).toFixed(2)),
      ...(real.serverCpu === undefined || base.serverCpu === undefined
        ? {}
        : { 'cpu µs/call': Math.round(real.serverCpu), 'baseline cpu µs/call': Math.round(base.serverCpu) }),
      'client cpu µs/call (atrium, baseline)': `${Math.round(real.clientCpu)}, ${Math.round(base.clientCpu)}`,
      errors: real.errors + base.errors,
    };
  } finally {
    await stopChildren(children);
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
