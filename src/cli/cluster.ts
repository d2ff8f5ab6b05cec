import { Cluster, StartAborted } from '../cluster/cluster.js';
import { type LayoutCounts, layoutFrom } from '../cluster/layout.js';
import { renderNginxSite } from '../cluster/nginx-config.js';
import { planLayout } from '../cluster/layout.js';
import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { instanceBodyLimit, plannedPorts } from '../cluster/cluster.js';
import { assertPlanFits } from '../cluster/ports.js';
import { ConfigError } from '../config/schema.js';
import { stopSignalDesk } from '../process/stop-signals.js';
import { parse } from './args.js';
import { printResult, UsageError } from './io.js';

const env = (name: string) => {
  const v = process.env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
};

/** A DNS name: labels of letters, digits and inner hyphens, joined by dots. */
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Why `path` cannot be run as a program, or undefined. */
function executableProblem(path: string): string | undefined {
  if (path === '') return 'empty';
  try {
    if (!statSync(path).isFile()) return `${path} is not a file`;
    accessSync(path, constants.X_OK);
    return undefined;
  } catch (err) {
    return `${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
}

/**
 * `atrium cluster`: the deployment layout on this machine (docs/deployment.md). Prints one JSON
 * object with the addresses once everything is ready, then runs until SIGINT/SIGTERM and stops it all.
 * Flags win over CLUSTER_* variables, which win over the defaults.
 */
export async function runCluster(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    'http-port': { type: 'string' },
    'grpc-port': { type: 'string' },
    'base-port': { type: 'string' },
    host: { type: 'string' },
    'database-url': { type: 'string' },
    'redis-url': { type: 'string' },
    nginx: { type: 'string' },
    api: { type: 'string' },
    auth: { type: 'string' },
    grpc: { type: 'string' },
    worker: { type: 'string' },
    'print-nginx': { type: 'boolean' },
  });
  let layout: LayoutCounts;
  try {
    layout = layoutFrom({ api: values.api, auth: values.auth, grpc: values.grpc, worker: values.worker });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // Each setting comes from its flag or its variable; a bad value is refused naming the one the
  // user set: a flag as bad usage (exit 2), a variable as invalid_configuration (exit 1).
  const setting = (flag: string, variable: string) => {
    const fromFlag = (values as Record<string, string | boolean | undefined>)[flag];
    const raw = typeof fromFlag === 'string' ? fromFlag : env(variable);
    const refuse = (accepts: string): Error =>
      typeof fromFlag === 'string'
        ? new UsageError(`--${flag}: ${accepts} (got ${JSON.stringify(fromFlag)})`)
        : new ConfigError(variable, accepts, raw ?? '');
    return { raw, refuse };
  };
  const port = (flag: string, variable: string, fallback: number) => {
    const { raw, refuse } = setting(flag, variable);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 65535) throw refuse('a port 1-65535');
    return Number(raw);
  };
  const httpPort = port('http-port', 'CLUSTER_HTTP_PORT', 8080);
  const grpcPort = port('grpc-port', 'CLUSTER_GRPC_PORT', 8081);
  const basePort = port('base-port', 'CLUSTER_BASE_PORT', 4000);
  const hostSetting = setting('host', 'CLUSTER_HOST');
  const host = hostSetting.raw ?? '127.0.0.1';
  // It goes into nginx's configuration and every process's HOST and PUBLIC_URL as it is.
  if (!isIP(host) && !HOSTNAME.test(host))
    throw hostSetting.refuse('an IP address or a host name (letters, digits, "-" and ".")');

  if (values['print-nginx']) {
    assertPlanFits(plannedPorts(layout, httpPort, grpcPort, planLayout(layout, basePort)));
    const specs = planLayout(layout, basePort);
    const at = (p: number) => `${isIP(host) === 6 ? `[${host}]` : host}:${p}`;
    process.stdout.write(
      renderNginxSite({
        httpListen: at(httpPort),
        grpcListen: at(grpcPort),
        api: specs.filter((s) => s.role === 'api').map((s) => at(s.port)),
        auth: specs.filter((s) => s.role === 'auth').map((s) => at(s.port)),
        grpc: specs.filter((s) => s.role === 'grpc').map((s) => at(s.grpcPort)),
        // nginx's limit sits above the instances' own, as `atrium cluster` would run them.
        bodyLimitBytes: instanceBodyLimit(process.env),
      }),
    );
    return 0;
  }

  const databaseSetting = setting('database-url', 'CLUSTER_DATABASE_URL');
  const databaseUrl = databaseSetting.raw ?? 'postgres://postgres@127.0.0.1:5432/atrium_cluster';
  if (!/^postgres(ql)?:\/\/[^/]/.test(databaseUrl) || !URL.canParse(databaseUrl))
    throw databaseSetting.refuse(
      'postgres://... for a cluster: several processes cannot share one SQLite file (docs/deployment.md)',
    );
  const redisSetting = setting('redis-url', 'CLUSTER_REDIS_URL');
  const redisUrl = redisSetting.raw ?? 'redis://127.0.0.1:6379';
  if (!/^rediss?:\/\/[^/]/.test(redisUrl) || !URL.canParse(redisUrl))
    throw redisSetting.refuse('redis://HOST:PORT or rediss://...');
  const nginxSetting = setting('nginx', 'CLUSTER_NGINX');
  const nginxBinary = nginxSetting.raw ?? '/usr/sbin/nginx';
  const nginxProblem = executableProblem(nginxBinary);
  if (nginxProblem)
    throw nginxSetting.refuse(`the path of the nginx program (apt-get install -y nginx): ${nginxProblem}`);

  // Before anything starts: a signal while the cluster starts stops what has started (processes,
  // nginx) instead of killing this process alone and leaving its children running. Until here,
  // bin/atrium.js's own handler answers a signal (the modules loading); everything above runs
  // without waiting, so a signal meanwhile is handled here.
  const aborting = new AbortController();
  let stopRequested: ((signal: NodeJS.Signals) => void) | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopRequested) stopRequested(signal);
    else if (!aborting.signal.aborted) {
      process.stderr.write(`atrium cluster: ${signal} while starting; stopping what has started\n`);
      aborting.abort();
    }
  };
  // The process's one listener (stop-signals.ts): handing over by removing listeners lost signals.
  const desk = stopSignalDesk();
  desk.take(onSignal);
  try {
    return await startAndRun();
  } finally {
    // Stopped or never started: nothing is left to stop, so a signal now only ends the exit sooner.
    desk.take(() => process.exit());
  }

  async function startAndRun(): Promise<number> {
    let cluster: Cluster;
    try {
      cluster = await Cluster.start({
        databaseUrl,
        redisUrl,
        layout,
        host,
        httpPort,
        grpcPort,
        basePort,
        nginxBinary,
        signal: aborting.signal,
      });
    } catch (err) {
      if (!(err instanceof StartAborted)) throw err;
      process.stderr.write('atrium cluster: stopped before it was ready\n');
      return 0;
    }
    const started = cluster;
    printResult({
      http: cluster.httpUrl,
      grpc: layout.grpc > 0 ? cluster.grpcAddress : null,
      processes: cluster.processes.map((p) => ({
        name: p.spec.name,
        role: p.spec.role,
        url: p.url,
        grpc: p.spec.grpcPort > 0 ? `${host}:${p.spec.grpcPort}` : undefined,
        pid: p.child.pid,
      })),
      logs: `${cluster.runDir}/logs`,
    });
    // A process that died left a log worth reading: the run directory stays then, and says where.
    let exitedAlone = false;
    const ports = (p: { port: number; grpcPort?: number }) =>
      p.grpcPort ? `port ${p.port}, gRPC ${p.grpcPort}` : `port ${p.port}`;
    cluster.supervise({
      exited(exit) {
        exitedAlone = true;
        const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
        const what =
          exit.restartInMs === undefined
            ? 'is not restarted'
            : `restarting it in ${exit.restartInMs / 1000} s (exit ${exit.exits} in a row)`;
        const after =
          exit.role === 'nginx' ? '; to bring it back, stop the cluster (Ctrl-C) and start it again' : '';
        process.stderr.write(
          `atrium cluster: ${exit.name} (role ${exit.role}, ${ports(exit)}) exited with ${how}; ${what}; its log: ${exit.log}${after}\n`,
        );
      },
      restarted(back) {
        process.stderr.write(
          `atrium cluster: ${back.name} (role ${back.role}, ${ports(back)}) restarted and ready, pid ${back.pid}\n`,
        );
      },
      notReady(late) {
        exitedAlone = true;
        process.stderr.write(
          `atrium cluster: ${late.name} (role ${late.role}, ${ports(late)}) restarted but not ready: ${late.reason}; ` +
            `stopping it (SIGTERM, SIGKILL after ${late.stopGraceMs / 1000} s), restarting it ${late.restartInMs / 1000} s ` +
            `after it exits (exit ${late.exits} in a row); its log: ${late.log}\n`,
        );
      },
    });
    process.stderr.write(`atrium cluster: ready at ${cluster.httpUrl}; Ctrl-C stops everything\n`);

    return new Promise<number>((resolve) => {
      stopRequested = () => {
        stopRequested = () => undefined;
        process.stderr.write('atrium cluster: stopping\n');
        started.stop({ keepRunDir: exitedAlone }).then(
          () => {
            if (exitedAlone) process.stderr.write(`atrium cluster: logs kept in ${started.runDir}\n`);
            resolve(0);
          },
          (err: unknown) => {
            process.stderr.write(`atrium cluster: ${(err as Error).message}\n`);
            resolve(1);
          },
        );
      };
    });
  }
}
