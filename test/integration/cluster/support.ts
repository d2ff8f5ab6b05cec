import { type ChildProcess, type ChildProcessByStdio, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, readFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, Socket } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import pg from 'pg';
import { expect } from 'vitest';
import { Cluster, type ClusterOptions } from '../../../src/cluster/cluster.js';
import type { LayoutCounts } from '../../../src/cluster/layout.js';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { portsNeeded } from '../../../src/cluster/layout.js';
import { root } from '../../helpers/cli.js';
import { freshDatabase } from '../../helpers/database.js';
import { ensureBuilt } from '../../helpers/build.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';

export const ON_CI = process.env.CI === 'true';
export const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const ADMIN_URL = process.env.TEST_DATABASE_URL?.startsWith('postgres')
  ? process.env.TEST_DATABASE_URL
  : 'postgres://postgres@127.0.0.1:5432/postgres';

function which(binary: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}
export const REDIS_SERVER = which('redis-server');

/**
 * Why the cluster tests cannot run here, or undefined when they can. They need nginx, redis-server
 * and a PostgreSQL server (several processes cannot share SQLite), whatever TEST_DATABASE_URL says.
 * On CI a missing prerequisite fails the tests instead of skipping them.
 */
export async function missingPrerequisite(): Promise<string | undefined> {
  let reason: string | undefined;
  if (!NGINX) reason = 'nginx is not installed (apt-get install -y nginx)';
  else if (!REDIS_SERVER) reason = 'redis-server is not installed (apt-get install -y redis-server)';
  else {
    const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
    } catch (err) {
      reason = `PostgreSQL at ${ADMIN_URL} does not answer (${(err as Error).message})`;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  if (reason === undefined) return undefined;
  if (ON_CI) return undefined; // let the set-up fail loudly
  console.error(`cluster tests skipped: ${reason}`);
  return reason;
}

/**
 * The one port at or above 10000 that fetch refuses to connect to (the Fetch standard's "bad ports",
 * amanda): a process given it was never found ready ("fetch failed" after the whole start timeout).
 */
const FETCH_BLOCKED_PORT = 10_080;

/**
 * Ports free right now (nginx needs them fixed before the processes start), picked below the
 * kernel's ephemeral range: a port the OS picked (listen on 0) is one it also hands out to outgoing
 * connections, and between its release here and the bind of the process meant to take it, another
 * test's client socket took one (EADDRINUSE at cluster start, seen under parallel test runs).
 */
export async function freePorts(n: number): Promise<number[]> {
  const [low] = ephemeralRange();
  const ports = new Set<number>();
  for (let attempts = 0; ports.size < n; attempts++) {
    if (attempts > n * 50) throw new Error(`no ${n} free ports below ${low}`);
    const port = 10_000 + Math.floor(Math.random() * (low - 10_000));
    if (port === FETCH_BLOCKED_PORT) continue;
    if (!ports.has(port) && (await bindable(port))) ports.add(port);
  }
  return [...ports];
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low && high && low > 11_000) return [low, high];
  } catch {
    // not Linux: the usual range
  }
  return [32_768, 60_999];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A base port with `n` free ports from it on (the CLI takes a base port, not a list). */
export async function freeRun(n: number): Promise<number> {
  for (;;) {
    const [base] = await freePorts(1);
    let ok = !(base! <= FETCH_BLOCKED_PORT && FETCH_BLOCKED_PORT < base! + n);
    for (let i = 1; i < n && ok; i++) ok = await bindable(base! + i);
    if (ok) return base!;
  }
}

/** Resolves once `condition` holds, checking every 50 ms (the test's own timeout bounds it). */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 50));
}

/** A redis-server of the test's own on a free port: it can be stopped without touching anyone else's. */
export class OwnRedis {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    /** More of redis-server's options (`--requirepass secret`). */
    private readonly options: string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(options: string[] = []): Promise<OwnRedis> {
    const [port] = await freePorts(1);
    const redis = new OwnRedis(port!, options);
    await redis.resume();
    return redis;
  }

  /**
   * Starts (again) on the same port and waits until it answers; nothing when it runs already. (A
   * second server cannot bind the port and exits, but the first answers the wait, so it was taken
   * for ours and `stop` left the first running: each such suite leaked a redis-server.)
   */
  async resume(): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const child = spawn(
      REDIS_SERVER ?? 'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        ...this.options,
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (await answers(this.port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`redis-server on ${this.port} did not start`);
  }

  /**
   * Hangs it as a stopped process or a path that swallows packets does (SIGSTOP): the kernel still
   * accepts connections and bytes, nothing answers. `thaw` continues it (SIGCONT).
   */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    // A frozen server would hold SIGTERM until continued.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    await exited;
  }
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.setTimeout(500);
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.once('data', (d: Buffer) => {
      socket.destroy();
      // A server that requires a password answers too: NOAUTH.
      resolve(/^(\+PONG|-NOAUTH)/.test(d.toString()));
    });
  });
}

export interface TestCluster {
  cluster: Cluster;
  /** The same store and Redis, built in the test process to make users, keys, clients and tokens. */
  services: Services;
  databaseUrl: string;
  stop(): Promise<void>;
}

/** The layout behind nginx on a fresh PostgreSQL database, with free ports for everything. */
export async function startTestCluster(options: {
  layout: LayoutCounts;
  redisUrl: string;
  databaseUrl?: string;
  env?: Record<string, string>;
  shutdownDelayMs?: number;
  /** The supervisor's timings (ClusterOptions.restart). */
  restart?: ClusterOptions['restart'];
  /**
   * How long a process may take to be ready, at the start and at each restart by the supervisor
   * (ClusterOptions.startTimeoutMs); 240 s by default, for a loaded machine.
   */
  startTimeoutMs?: number;
}): Promise<TestCluster> {
  ensureBuilt();
  const database = options.databaseUrl
    ? { url: options.databaseUrl, drop: async () => undefined }
    : await freshDatabase({ adminUrl: ADMIN_URL });
  const [httpPort, grpcPort, ...ports] = await freePorts(2 + portsNeeded(options.layout));
  const clusterOptions: ClusterOptions = {
    databaseUrl: database.url,
    redisUrl: options.redisUrl,
    layout: options.layout,
    httpPort: httpPort!,
    grpcPort: grpcPort!,
    ports,
    nginxBinary: NGINX,
    ...(options.shutdownDelayMs === undefined ? {} : { shutdownDelayMs: options.shutdownDelayMs }),
    ...(options.restart === undefined ? {} : { restart: options.restart }),
    env: { NODE_ENV: 'development', LOG_LEVEL: 'warn', ...options.env },
    startTimeoutMs: options.startTimeoutMs ?? 240_000,
  };
  let cluster: Cluster;
  try {
    cluster = await Cluster.start(clusterOptions);
  } catch (err) {
    await database.drop();
    throw err;
  }
  const services = await createServices(
    parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url, REDIS_URL: options.redisUrl }),
    { migrate: false },
  );
  return {
    cluster,
    services,
    databaseUrl: database.url,
    async stop() {
      await closeServices(services);
      await cluster.stop();
      await database.drop();
      cluster.removeRunDir();
    },
  };
}

/**
 * A PostgreSQL server of the test's own (initdb + pg_ctl from Debian's packages, on a free port,
 * trust auth), so a test can stop and start it. initdb refuses root, so as root it runs as the
 * `postgres` user the Debian package creates.
 */
export class OwnPostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
  ) {}

  get adminUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  databaseUrl(name: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${name}`;
  }

  static binDir(): string | undefined {
    const base = '/usr/lib/postgresql';
    if (!existsSync(base)) return undefined;
    const versions = readdirSync(base)
      .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    return versions[0] ? join(base, versions[0], 'bin') : undefined;
  }

  static async start(): Promise<OwnPostgres> {
    const bin = OwnPostgres.binDir();
    if (!bin)
      throw new Error('initdb not found under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)');
    const [port] = await freePorts(1);
    const dir = mkdtempSync(join(tmpdir(), 'atrium-own-pg-'));
    if (process.getuid?.() === 0) chownSync(dir, postgresUid(), postgresGid());
    const pg = new OwnPostgres(port!, dir, bin);
    pg.run('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await pg.resume();
    return pg;
  }

  private run(tool: string, args: string[]): void {
    const path = join(this.bin, tool);
    if (process.getuid?.() === 0)
      execFileSync('runuser', ['-u', 'postgres', '--', path, ...args], { stdio: 'ignore' });
    else execFileSync(path, args, { stdio: 'ignore' });
  }

  async resume(): Promise<void> {
    this.run('pg_ctl', [
      '-D',
      join(this.dir, 'data'),
      '-l',
      join(this.dir, 'server.log'),
      '-o',
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`,
      '-w',
      'start',
    ]);
  }

  /** A fast shutdown: open connections are terminated, as in a restart or a failover. */
  async stop(): Promise<void> {
    this.run('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'fast', '-w', 'stop']);
  }

  async remove(): Promise<void> {
    await this.stop().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function postgresUid(): number {
  return Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
}
function postgresGid(): number {
  return Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
}

/** Like missingPrerequisite, for the tests that run a PostgreSQL server of their own. */
export function initdbMissing(): string | undefined {
  if (OwnPostgres.binDir() || ON_CI) return undefined;
  const reason = 'initdb is not installed (apt-get install -y postgresql)';
  console.error(`cluster tests skipped: ${reason}`);
  return reason;
}

/** A running `atrium cluster` command and what it has written so far. */
export interface ClusterCommand {
  child: ChildProcessByStdio<null, Readable, Readable>;
  out: { stdout: string; stderr: string };
  exited: Promise<number | null>;
  /** CLUSTER_HTTP_PORT (nginx) and CLUSTER_BASE_PORT (the first process). */
  httpPort: number;
  basePort: number;
  /** Resolves once it has printed its line of addresses (it is ready), or has exited. */
  printed(): Promise<void>;
}

/**
 * `atrium cluster` with `layout` as a user starts it: the built CLI, or `npm run cluster` (which
 * execs it), set up by CLUSTER_* variables for free ports, the test Redis, this machine's nginx and
 * a fresh PostgreSQL database, dropped once `use` is done whatever happened. `args` follow the
 * layout's flags; a flag wins over its variable. The processes' HTTP ports are checked free; gRPC
 * ports (base + 100) are not, so the layouts here run no grpc process.
 */
export async function withClusterCommand(
  options: { layout: LayoutCounts; args?: string[]; via?: 'node' | 'npm' },
  use: (run: ClusterCommand) => Promise<void>,
): Promise<void> {
  const { layout } = options;
  const [httpPort] = await freePorts(1);
  const basePort = await freeRun(layout.api + layout.auth + layout.grpc + layout.worker);
  const database = await freshDatabase({ adminUrl: ADMIN_URL });
  try {
    const flags = [
      ...(['api', 'auth', 'grpc', 'worker'] as const).flatMap((role) => [`--${role}`, String(layout[role])]),
      ...(options.args ?? []),
    ];
    const [command, args] =
      options.via === 'npm'
        ? ['npm', ['run', '-s', 'cluster', '--', ...flags]]
        : [process.execPath, [join(root, 'bin/atrium.js'), 'cluster', ...flags]];
    const child = spawn(command, args, {
      cwd: root,
      env: {
        ...process.env,
        NODE_ENV: 'development',
        LOG_LEVEL: 'warn',
        CLUSTER_HTTP_PORT: String(httpPort),
        CLUSTER_BASE_PORT: String(basePort),
        CLUSTER_DATABASE_URL: database.url,
        CLUSTER_REDIS_URL: TEST_REDIS_URL,
        ...(NGINX ? { CLUSTER_NGINX: NGINX } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = { stdout: '', stderr: '' };
    child.stdout.on('data', (d) => (out.stdout += d));
    child.stderr.on('data', (d) => (out.stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await use({
      child,
      out,
      exited,
      httpPort: httpPort!,
      basePort,
      printed: () => until(() => out.stdout.includes('\n') || child.exitCode !== null),
    });
  } finally {
    await database.drop();
  }
}

/** An answer nginx gave itself as JSON (its error pages keep nginx's Server header). */
export function expectNginxJson(res: Response): void {
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('server')).toBe('nginx');
}

/**
 * An error nginx answered itself in the REST shape: the status, JSON, and the request id in the
 * X-Request-Id header and in the body, `{ error, message, request_id, details: [] }`.
 */
export async function expectNginxRestError(
  res: Response,
  status: number,
  body: { error: string; message: string; request_id: string },
): Promise<void> {
  expect(res.status).toBe(status);
  expectNginxJson(res);
  expect(res.headers.get('x-request-id')).toBe(body.request_id);
  expect(await res.json()).toEqual({ ...body, details: [] });
}

/**
 * The `client_max_body_size` values in rendered nginx configuration (a site, as `--print-nginx`
 * prints it, or a whole nginx.conf), in bytes: one entry per `server {}` block, in order, each
 * split by where the limit is set. `server`: at the server's own level (what every location in it
 * inherits; an empty list means nginx's default of 1m); `locations`: inside its locations, where
 * `0` means no limit at all.
 */
function bodyLimitsByServer(conf: string): { server: number[]; locations: number[] }[] {
  const units: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };
  const servers: { server: number[]; locations: number[] }[] = [];
  let depth = 0;
  let serverDepth: number | undefined;
  for (const raw of conf.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (/^server\s*\{$/.test(line)) {
      servers.push({ server: [], locations: [] });
      serverDepth = depth + 1;
    }
    const limit = /^client_max_body_size\s+(\d+)([kmg]?);$/i.exec(line);
    if (limit && serverDepth !== undefined && depth >= serverDepth) {
      const bytes = Number(limit[1]) * units[limit[2]!.toLowerCase()]!;
      servers.at(-1)![depth === serverDepth ? 'server' : 'locations'].push(bytes);
    }
    depth += (line.match(/\{/g) ?? []).length - (line.match(/\}/g) ?? []).length;
    if (serverDepth !== undefined && depth < serverDepth) serverDepth = undefined;
  }
  return servers;
}

/** Per `server {}` block, the client_max_body_size values it sets at its own level (bytes). */
export const serverBodyLimits = (conf: string): number[][] => bodyLimitsByServer(conf).map((s) => s.server);

/** Per `server {}` block, the client_max_body_size values its locations set (bytes; 0 is no limit). */
export const locationBodyLimits = (conf: string): number[][] =>
  bodyLimitsByServer(conf).map((s) => s.locations);

/** The one JSON line a refused `atrium cluster` writes on stderr (nothing on stdout), with its exit code. */
export function refusal(result: { code: number | null; stdout: string; stderr: string }) {
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(result.stdout).toBe('');
  return {
    code: result.code,
    ...(JSON.parse(lines[0]!) as { error: string; variable?: string; message: string }),
  };
}
