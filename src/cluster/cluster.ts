import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readEnvFile } from '../config/env-file.js';
import { bodyLimitBytesFrom, ConfigError } from '../config/schema.js';
import { Child, waitForOk } from './child.js';
import { ensureDatabase } from './database.js';
import { type LayoutCounts, planLayout, type ProcessSpec } from './layout.js';
import { type NginxSite, renderNginxMain } from './nginx-config.js';
import { assertPlanFits, assertPortsFree, type PlannedPort } from './ports.js';
import { withoutPassword } from '../config/redact.js';
import { checkRedisBeforeStart } from '../shared/redis-connection.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** How long the start waits for Redis to answer; as long as a process's own start waits for Redis. */
const REDIS_CHECK_MS = 5_000;

export interface ClusterOptions {
  /** PostgreSQL; the database is created when missing. SQLite is refused. */
  databaseUrl: string;
  redisUrl: string;
  layout: LayoutCounts;
  /** Interface for nginx and every process. */
  host?: string;
  /** nginx's HTTP listener (REST, GraphQL, token server). */
  httpPort: number;
  /** nginx's gRPC (h2c) listener. */
  grpcPort: number;
  /** First port of the processes (see planLayout); `ports` gives them one by one instead. */
  basePort?: number;
  ports?: number[];
  nginxBinary?: string;
  /** How to run the atrium CLI; default the built one (`node bin/atrium.js`). */
  command?: string[];
  /** Extra environment for every process (NODE_ENV, LOG_LEVEL, JWT_SECRET, ...). */
  env?: Record<string, string>;
  /**
   * How long each process keeps answering (with `Connection: close`) after SIGTERM before its
   * listener closes (SHUTDOWN_DELAY_MS); default 2000, over nginx's 1 s upstream keep-alive so that
   * nginx has closed its idle connections by then (nginx-config.ts).
   */
  shutdownDelayMs?: number;
  /**
   * Working directory for logs and nginx; a fresh temporary one by default, which stop() removes
   * (a directory given here is the caller's and stays).
   */
  runDir?: string;
  startTimeoutMs?: number;
  /**
   * The supervisor's timings (supervise()): the restart delay after a first exit, doubled per exit
   * in a row up to `maxDelayMs` (RESTART_BACKOFF_MS by default), and how long a restarted process
   * that is not ready within startTimeoutMs has between SIGTERM and SIGKILL (NOT_READY_STOP_GRACE_MS).
   * Tests make them small.
   */
  restart?: { initialDelayMs?: number; maxDelayMs?: number; stopGraceMs?: number };
  /**
   * Aborting it while start() runs stops whatever has started (migration, processes, nginx) and
   * makes start() throw StartAborted (a SIGTERM to `atrium cluster` before it is ready).
   */
  signal?: AbortSignal;
}

/** start() was aborted through its signal; everything it had started is stopped. */
export class StartAborted extends Error {
  constructor() {
    super('the cluster was stopped before it was ready');
  }
}

/** A process of the cluster (or its nginx) that exited without being asked to. */
export interface UnexpectedExit {
  name: string;
  /** api, auth, grpc, worker, or nginx. */
  role: string;
  /** Its HTTP port (nginx: the HTTP listener). */
  port: number;
  grpcPort?: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  log: string;
  /** When it is started again, in ms from now; undefined: it is not (nginx, or the cluster stops). */
  restartInMs?: number;
  /** How many times in a row it has exited (1 the first time; reset once it stays up). */
  exits: number;
}

/** A process of the cluster started again after an UnexpectedExit, and ready. */
export interface Restarted {
  name: string;
  role: string;
  port: number;
  grpcPort?: number;
  pid: number | undefined;
}

/**
 * A process of the cluster started again after an UnexpectedExit, alive but not ready within the
 * start timeout: it is stopped (SIGTERM, SIGKILL after `stopGraceMs`), which counts as another exit
 * in a row, and started again `restartInMs` after it has exited.
 */
export interface NotReady {
  name: string;
  role: string;
  port: number;
  grpcPort?: number;
  pid: number | undefined;
  /** Why it is not ready (the last answer of its /readyz). */
  reason: string;
  log: string;
  stopGraceMs: number;
  /** When it is started again, in ms from its exit. */
  restartInMs: number;
  /** Exits in a row, this one included. */
  exits: number;
}

/** What supervise() tells its caller. */
export interface SupervisorEvents {
  exited(exit: UnexpectedExit): void;
  restarted?(restarted: Restarted): void;
  /** Started again, alive, but not ready within the start timeout: stopped and started again. */
  notReady?(notReady: NotReady): void;
}

/**
 * The restart delay after a process's n-th exit in a row: 1 s, doubled each time, at most 30 s
 * (as systemd's RestartSec with steps, or Kubernetes' CrashLoopBackOff, though shorter: one machine,
 * and a crash is worth retrying soon). A process ready for RESTART_RESET_AFTER_MS counts as up: its
 * next exit waits 1 s again.
 */
export const RESTART_BACKOFF_MS = { initial: 1_000, max: 30_000 } as const;
export const RESTART_RESET_AFTER_MS = 60_000;
export const restartDelayMs = (
  exits: number,
  backoff: { initial: number; max: number } = RESTART_BACKOFF_MS,
): number => Math.min(backoff.initial * 2 ** Math.max(0, exits - 1), backoff.max);

/**
 * A restarted process alive but not ready within the start timeout gets SIGTERM, and SIGKILL this
 * long after: over its drain in the cluster (SHUTDOWN_DELAY_MS twice, 4 s), short enough that a
 * process too stuck to drain does not hold its ports long.
 */
export const NOT_READY_STOP_GRACE_MS = 10_000;

interface RestartState {
  /** Exits in a row (see RESTART_RESET_AFTER_MS). */
  exits: number;
  /** When it was last ready; undefined while it is down or starting. */
  readyAt: number | undefined;
  timer: NodeJS.Timeout | undefined;
}

export interface RunningProcess {
  spec: ProcessSpec;
  child: Child;
  url: string;
}

/** nginx skips a failed instance this long (fail_timeout in nginx-config.ts), plus a margin. */
const NGINX_RETRY_AFTER_MS = 2_500;

/**
 * One machine running the deployment layout: `atrium serve --role R` processes against one
 * PostgreSQL and one Redis, behind a private nginx (its own prefix and config in `runDir`, not the
 * system service). Used by `atrium cluster`, the cluster tests and the cluster benchmark.
 */
export class Cluster {
  private nginx: Child | undefined;
  private migrating: Child | undefined;
  private site: NginxSite | undefined;
  /** stop() has begun: nothing is restarted any more. */
  private stopping = false;
  private readonly restarts = new Map<string, RestartState>();
  /**
   * Processes that should get nothing from nginx (stopped by restart(), exited, starting again, not
   * ready): syncRotation() takes one of each balanced role out of rotation.
   */
  private readonly unwanted = new Set<RunningProcess>();
  /** The process of each role whose out-of-rotation file exists (nginx honours one per role). */
  private readonly outOfRotation = new Map<string, RunningProcess>();
  /** runDir was made by start(), so stop() removes it: nothing is left in /tmp after a run. */
  private readonly ownsRunDir: boolean;
  private constructor(
    readonly options: ClusterOptions,
    readonly runDir: string,
    readonly processes: RunningProcess[],
    private readonly command: string[],
    private readonly env: NodeJS.ProcessEnv,
    /** The processes' BODY_LIMIT_BYTES; nginx's own limit is rendered above it. */
    private readonly bodyLimitBytes: number,
  ) {
    this.ownsRunDir = options.runDir === undefined;
  }

  get httpUrl(): string {
    return `http://${hostForUrl(this.options.host ?? '127.0.0.1')}:${this.options.httpPort}`;
  }

  get grpcAddress(): string {
    return `${hostForUrl(this.options.host ?? '127.0.0.1')}:${this.options.grpcPort}`;
  }

  /** The processes of one role, in order (api-1, api-2, ...). */
  role(role: ProcessSpec['role']): RunningProcess[] {
    return this.processes.filter((p) => p.spec.role === role);
  }

  static async start(options: ClusterOptions): Promise<Cluster> {
    if (!/^postgres(ql)?:\/\//.test(options.databaseUrl)) {
      throw new ConfigError(
        'CLUSTER_DATABASE_URL',
        'postgres://... for a cluster: several processes cannot share one SQLite file (docs/deployment.md)',
        options.databaseUrl,
      );
    }
    const host = options.host ?? '127.0.0.1';
    const specs = planLayout(options.layout, options.basePort ?? 4000, options.ports);
    const planned = plannedPorts(options.layout, options.httpPort, options.grpcPort, specs);
    assertPlanFits(planned);
    const publicUrl = `http://${hostForUrl(host)}:${options.httpPort}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: process.env.NODE_ENV === 'test' ? 'development' : (process.env.NODE_ENV ?? 'development'),
      ...options.env,
      HOST: host,
      DATABASE_URL: options.databaseUrl,
      REDIS_URL: options.redisUrl,
      PUBLIC_URL: publicUrl,
      AUTH_URL: options.env?.AUTH_URL ?? publicUrl,
      // One proxy hop (this nginx) sits in front of every process; see deploy/README.md.
      TRUST_PROXY: options.env?.TRUST_PROXY ?? '1',
      SHUTDOWN_DELAY_MS: String(options.shutdownDelayMs ?? 2000),
    };
    // nginx's limit follows the processes' own, from the environment they get. Read before anything
    // starts: a bad value stops the start with one line naming the variable.
    const bodyLimitBytes = instanceBodyLimit(env);
    await assertPortsFree(host, planned);
    // A signal while the command loaded or checked its inputs: nothing made yet, not even the database.
    if (options.signal?.aborted) throw new StartAborted();
    await ensureDatabase(options.databaseUrl).catch((err: unknown) => {
      // The server does not answer, refuses the user, ...: a setting to change, not an internal error.
      const { code, message } = err as { code?: string; message?: string };
      throw new ConfigError(
        'CLUSTER_DATABASE_URL',
        `a PostgreSQL server that answers and lets its user create the database (${code ?? message ?? String(err)})`,
        withoutPassword(options.databaseUrl),
      );
    });
    // A Redis that refuses the login would stop every process at its start (REDIS_URL's error in
    // its log), and one that does not answer would keep every /readyz at 503 until the start gives
    // up: either is said here instead, once, as this command's own setting.
    await checkRedisBeforeStart(options.redisUrl, REDIS_CHECK_MS, 'CLUSTER_REDIS_URL');
    if (options.signal?.aborted) throw new StartAborted();
    const runDir = options.runDir ?? mkdtempSync(join(tmpdir(), 'atrium-cluster-'));
    mkdirSync(join(runDir, 'logs'), { recursive: true });
    const command = options.command ?? [process.execPath, join(ROOT, 'bin/atrium.js')];
    const processes = specs.map((spec) => ({
      spec,
      url: `http://${hostForUrl(host)}:${spec.port}`,
      child: new Child(
        spec.name,
        command[0]!,
        [...command.slice(1), 'serve', '--role', spec.role],
        { ...env, PORT: String(spec.port), GRPC_PORT: String(spec.grpcPort) },
        join(runDir, 'logs', `${spec.name}.log`),
        ROOT,
      ),
    }));
    const cluster = new Cluster(options, runDir, processes, command, env, bodyLimitBytes);
    const { signal } = options;
    const whenAborted = () => void cluster.stop();
    signal?.addEventListener('abort', whenAborted, { once: true });
    const goOn = () => {
      if (signal?.aborted) throw new StartAborted();
    };
    try {
      await cluster.migrate();
      goOn();
      await Promise.all(processes.map((p) => cluster.startProcess(p)));
      goOn();
      await cluster.startNginx();
      goOn();
    } catch (err) {
      await cluster.stop();
      throw signal?.aborted ? new StartAborted() : err;
    } finally {
      signal?.removeEventListener('abort', whenAborted);
    }
    return cluster;
  }

  /** Migrations run once, before any instance starts (the upgrade procedure of docs/deployment.md). */
  private async migrate(): Promise<void> {
    const child = new Child(
      'migrate',
      this.command[0]!,
      [...this.command.slice(1), 'migrate'],
      this.env,
      join(this.runDir, 'logs', 'migrate.log'),
      ROOT,
    );
    this.migrating = child;
    child.start();
    const code = await child.whenExited();
    this.migrating = undefined;
    await child.closeLog();
    if (this.options.signal?.aborted) throw new StartAborted();
    if (code !== 0) throw new Error(`atrium migrate failed (exit ${code}): ${this.tail('migrate')}`);
  }

  private async startProcess(p: RunningProcess): Promise<void> {
    p.child.start();
    try {
      await waitForOk(`${p.url}/readyz`, this.options.startTimeoutMs ?? 60_000, () => p.child.running);
    } catch (err) {
      throw new Error(
        `${p.spec.name} did not become ready: ${(err as Error).message}\n${this.tail(p.spec.name)}`,
      );
    }
  }

  private async startNginx(): Promise<void> {
    const host = this.options.host ?? '127.0.0.1';
    const address = (port: number) => `${hostForUrl(host)}:${port}`;
    this.site = {
      httpListen: address(this.options.httpPort),
      grpcListen: address(this.options.grpcPort),
      api: this.role('api').map((p) => address(p.spec.port)),
      auth: this.role('auth').map((p) => address(p.spec.port)),
      grpc: this.role('grpc').map((p) => address(p.spec.grpcPort)),
      bodyLimitBytes: this.bodyLimitBytes,
      outOfRotationDir: join(this.runDir, 'out-of-rotation'),
    };
    // nginx's workers test for the files in it, and run as another user when nginx starts as root
    // (`nobody`): a file they may not see would leave the instance in rotation without a word.
    chmodSync(this.runDir, 0o711);
    mkdirSync(this.site.outOfRotationDir!, { recursive: true, mode: 0o755 });
    const conf = join(this.runDir, 'nginx.conf');
    writeFileSync(conf, renderNginxMain(this.site, this.runDir));
    const binary = this.options.nginxBinary ?? '/usr/sbin/nginx';
    this.nginx = new Child(
      'nginx',
      binary,
      ['-p', this.runDir, '-c', conf, '-e', join(this.runDir, 'error.log'), '-g', 'daemon off;'],
      { PATH: process.env.PATH ?? '' },
      join(this.runDir, 'logs', 'nginx.log'),
      this.runDir,
    );
    this.nginx.start();
    const nginx = this.nginx;
    try {
      // nginx adds `Server: nginx` (server_tokens off) and drops the instances' own Server header;
      // an answer without it comes from someone else on the port, never from this nginx.
      await waitForOk(
        `${this.httpUrl}/healthz`,
        15_000,
        () => nginx.running,
        (res) =>
          res.headers.get('server')?.startsWith('nginx')
            ? undefined
            : `answered without nginx's Server header: another process listens on ${this.options.httpPort}`,
      );
    } catch (err) {
      throw new Error(
        `nginx (${binary}) did not start: ${(err as Error).message}\n${this.tail('nginx')}${readOr(join(this.runDir, 'error.log'))}`,
      );
    }
  }

  /** The process called `name` (`api-1`, ...). */
  process(name: string): RunningProcess {
    const p = this.processes.find((x) => x.spec.name === name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  /**
   * SIGTERM (the process drains and exits), start it again, wait until it is ready. When another
   * process of its role stays in rotation, nginx first stops sending it anything new (its file in the
   * out-of-rotation directory, checked by nginx on every request: no reload, see nginx-config.ts),
   * so no request or call can meet its closing listener or connections; it is put back once ready.
   * (Not when another process of its role is out already, one that exited and is not back: nginx
   * honours one file per role, see syncRotation.)
   */
  async restart(name: string): Promise<void> {
    const p = this.process(name);
    this.setWanted(p, false);
    const code = await p.child.stop('SIGTERM');
    if (code !== 0) throw new Error(`${name} exited ${code} on SIGTERM: ${this.tail(name)}`);
    await this.startProcess(p);
    this.setWanted(p, true);
  }

  /**
   * Marks `p` as one nginx should send nothing to (`wanted` false: stopping, down, starting, not
   * ready) or anything again (ready), and updates the out-of-rotation files.
   */
  private setWanted(p: RunningProcess, wanted: boolean): void {
    if (wanted) this.unwanted.delete(p);
    else this.unwanted.add(p);
    this.syncRotation(p.spec.role);
  }

  /**
   * nginx's configuration takes at most one process of a role out of rotation (with two files, only
   * the last `if` counts; nginx-config.ts), so: the file of a process that is wanted again goes, and
   * when the role has no file, the first unwanted process gets one, provided another process of its
   * role stays in rotation (a role of one process, or one whose every process is down, has nowhere
   * else to send requests: nginx's own failure handling is all there is then).
   */
  private syncRotation(role: ProcessSpec['role']): void {
    if (role === 'worker') return;
    const processes = this.role(role);
    if (processes.length < 2) return;
    const out = this.outOfRotation.get(role);
    if (out && !this.unwanted.has(out)) {
      this.setOutOfRotation(this.upstreamAddress(out)!, false);
      this.outOfRotation.delete(role);
    }
    if (this.outOfRotation.has(role)) return;
    const down = processes.filter((p) => this.unwanted.has(p));
    if (down.length === 0 || down.length === processes.length) return;
    this.setOutOfRotation(this.upstreamAddress(down[0]!)!, true);
    this.outOfRotation.set(role, down[0]!);
  }

  /**
   * The address nginx's upstream names `p` by, and so its out-of-rotation file: the HTTP port for
   * api and auth (proxy_pass), the gRPC port for grpc (grpc_pass, whose server block tests the same
   * directory); undefined for a worker, which nginx does not balance.
   */
  private upstreamAddress(p: RunningProcess): string | undefined {
    const host = hostForUrl(this.options.host ?? '127.0.0.1');
    if (p.spec.role === 'api' || p.spec.role === 'auth') return `${host}:${p.spec.port}`;
    if (p.spec.role === 'grpc') return `${host}:${p.spec.grpcPort}`;
    return undefined;
  }

  /** Creates (or removes) the file that takes `address` out of nginx's rotation from the next request. */
  private setOutOfRotation(address: string, out: boolean): void {
    const dir = this.site?.outOfRotationDir;
    if (!dir) return;
    const file = join(dir, address);
    if (out) writeFileSync(file, '');
    else rmSync(file, { force: true });
  }

  /**
   * Restarts every process of `role` one after the other; before stopping the next it waits until
   * nginx has taken the restarted one back into rotation.
   */
  async rollingRestart(role: ProcessSpec['role']): Promise<void> {
    for (const p of this.role(role)) {
      await this.restart(p.spec.name);
      await new Promise((r) => setTimeout(r, NGINX_RETRY_AFTER_MS));
    }
  }

  /**
   * Stops nginx (gracefully), then every process (SIGTERM, drain), in parallel; then removes the
   * run directory when start() made it, unless `keepRunDir` (logs worth reading: a process died).
   */
  async stop(options: { keepRunDir?: boolean } = {}): Promise<void> {
    this.stopping = true;
    for (const state of this.restarts.values()) clearTimeout(state.timer);
    await this.migrating?.stop('SIGTERM');
    await this.nginx?.stop('SIGQUIT', 10_000);
    await this.nginx?.closeLog();
    await Promise.all(
      this.processes.map(async (p) => {
        await p.child.stop('SIGTERM');
        await p.child.closeLog();
      }),
    );
    if (this.ownsRunDir && !options.keepRunDir) this.removeRunDir();
  }

  /**
   * Supervises the processes from now on: one that exits without stop() or restart() having stopped
   * it (a crash, an OOM kill, a signal from outside, even a clean exit) is reported, then started
   * again on the same ports after restartDelayMs (1 s, doubling to 30 s while it keeps exiting),
   * and reported again once ready. A process of a balanced role (another process of its role stays
   * in rotation) is taken out of nginx's rotation as soon as its exit is seen, as restart() does,
   * and put back once its /readyz answers 200 again: nginx sends it nothing while it is down or
   * starting, rather than learning of it from refused connections. A role with no process left
   * answers 502. A restarted process alive but not ready within the start timeout is stopped
   * (SIGTERM, SIGKILL after NOT_READY_STOP_GRACE_MS), counted as another exit in a row and started
   * again after the doubled delay; it stays out of rotation meanwhile. nginx itself is reported,
   * not restarted: a master killed outright can leave workers holding its ports.
   */
  supervise(events: SupervisorEvents): void {
    for (const p of this.processes) {
      this.restarts.set(p.spec.name, { exits: 0, readyAt: Date.now(), timer: undefined });
      p.child.onUnexpectedExit = (code, signal) => this.exited(p, code, signal, events);
    }
    if (this.nginx)
      this.nginx.onUnexpectedExit = (code, signal) =>
        events.exited({
          name: 'nginx',
          role: 'nginx',
          port: this.options.httpPort,
          code,
          signal,
          log: join(this.runDir, 'error.log'),
          exits: 1,
        });
  }

  /** The delay before the next start after the n-th exit in a row (options.restart, or the default). */
  private restartDelay(exits: number): number {
    const { initialDelayMs, maxDelayMs } = this.options.restart ?? {};
    return restartDelayMs(exits, {
      initial: initialDelayMs ?? RESTART_BACKOFF_MS.initial,
      max: maxDelayMs ?? RESTART_BACKOFF_MS.max,
    });
  }

  private exited(
    p: RunningProcess,
    code: number | null,
    signal: NodeJS.Signals | null,
    events: SupervisorEvents,
  ): void {
    // Out of rotation first: every request nginx would send it from now on meets a refused connection.
    if (!this.stopping) this.setWanted(p, false);
    const state = this.restarts.get(p.spec.name)!;
    if (state.readyAt !== undefined && Date.now() - state.readyAt >= RESTART_RESET_AFTER_MS) state.exits = 0;
    state.readyAt = undefined;
    state.exits++;
    const delay = this.stopping ? undefined : this.restartDelay(state.exits);
    events.exited({
      ...this.describe(p),
      code,
      signal,
      log: join(this.runDir, 'logs', `${p.spec.name}.log`),
      exits: state.exits,
      ...(delay === undefined ? {} : { restartInMs: delay }),
    });
    if (delay === undefined) return;
    this.scheduleRevive(p, state, events, delay);
  }

  private scheduleRevive(
    p: RunningProcess,
    state: RestartState,
    events: SupervisorEvents,
    delay: number,
  ): void {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => void this.revive(p, state, events), delay);
  }

  private async revive(p: RunningProcess, state: RestartState, events: SupervisorEvents): Promise<void> {
    state.timer = undefined;
    if (this.stopping || p.child.running) return;
    try {
      await this.startProcess(p);
    } catch (err) {
      // Exited while starting: already reported, and its next start planned (exited above).
      if (this.stopping || !p.child.running) return;
      await this.stopNotReady(p, state, events, (err as Error).message.split('\n')[0]!);
      return;
    }
    if (this.stopping) return;
    state.readyAt = Date.now();
    this.setWanted(p, true);
    events.restarted?.({ ...this.describe(p), pid: p.child.pid });
  }

  /**
   * A restarted process alive but not ready within the start timeout: whatever holds it (a wedged
   * start, a dependency it cannot reach), it is not left running unwatched, out of rotation for
   * good. It is stopped like any process (SIGTERM: it drains), killed if still there after the grace,
   * and that counts as another exit in a row: the next start waits the doubled delay.
   */
  private async stopNotReady(
    p: RunningProcess,
    state: RestartState,
    events: SupervisorEvents,
    reason: string,
  ): Promise<void> {
    state.exits++;
    const delay = this.restartDelay(state.exits);
    const stopGraceMs = this.options.restart?.stopGraceMs ?? NOT_READY_STOP_GRACE_MS;
    events.notReady?.({
      ...this.describe(p),
      pid: p.child.pid,
      reason,
      log: join(this.runDir, 'logs', `${p.spec.name}.log`),
      stopGraceMs,
      restartInMs: delay,
      exits: state.exits,
    });
    await p.child.stop('SIGTERM', stopGraceMs);
    if (this.stopping) return;
    this.scheduleRevive(p, state, events, delay);
  }

  private describe(p: RunningProcess): { name: string; role: string; port: number; grpcPort?: number } {
    return {
      name: p.spec.name,
      role: p.spec.role,
      port: p.spec.port,
      ...(p.spec.grpcPort > 0 ? { grpcPort: p.spec.grpcPort } : {}),
    };
  }

  /** Removes the run directory (logs, nginx config), even one given as `runDir`; after stop(). */
  removeRunDir(): void {
    rmSync(this.runDir, { recursive: true, force: true });
  }

  /** The last lines a process wrote, for error messages. */
  tail(name: string, lines = 20): string {
    return readOr(join(this.runDir, 'logs', `${name}.log`))
      .split('\n')
      .slice(-lines)
      .join('\n');
  }
}

/**
 * BODY_LIMIT_BYTES as the cluster's instances will read it: `env` first, then the `.env` file in
 * ROOT, their working directory (config/load.ts). nginx's limit is rendered above it.
 */
export function instanceBodyLimit(env: NodeJS.ProcessEnv): number {
  const seen = { ...env };
  readEnvFile(join(ROOT, '.env'), seen, []);
  return bodyLimitBytesFrom(seen);
}

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** Every port nginx and the processes will listen on, with the setting that chose it. */
export function plannedPorts(
  layout: LayoutCounts,
  httpPort: number,
  grpcPort: number,
  specs: readonly ProcessSpec[],
): PlannedPort[] {
  return [
    { port: httpPort, setting: 'CLUSTER_HTTP_PORT', listener: 'nginx (HTTP)' },
    ...(layout.grpc > 0 ? [{ port: grpcPort, setting: 'CLUSTER_GRPC_PORT', listener: 'nginx (gRPC)' }] : []),
    ...specs.flatMap((s) =>
      [s.port, s.grpcPort]
        .filter((port) => port > 0)
        .map((port) => ({ port, setting: 'CLUSTER_BASE_PORT', listener: s.name })),
    ),
  ];
}

function hostForUrl(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
