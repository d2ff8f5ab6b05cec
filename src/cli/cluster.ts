import { Cluster, StartAborted } from '../cluster/cluster.js';
import { type LayoutCounts, layoutFrom } from '../cluster/layout.js';
import { renderNginxSite } from '../cluster/nginx-config.js';
import { planLayout } from '../cluster/layout.js';
import { integer, parse } from './args.js';
import { printResult, UsageError } from './io.js';

const env = (name: string) => {
  const v = process.env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
};

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
  const port = (flag: string, variable: string, fallback: number) => {
    const raw = (values as Record<string, string | undefined>)[flag] ?? env(variable);
    const n = integer(raw, flag) ?? fallback;
    if (n < 1 || n > 65535) throw new UsageError(`--${flag} must be a port 1-65535`);
    return n;
  };
  const httpPort = port('http-port', 'CLUSTER_HTTP_PORT', 8080);
  const grpcPort = port('grpc-port', 'CLUSTER_GRPC_PORT', 8081);
  const basePort = port('base-port', 'CLUSTER_BASE_PORT', 4000);
  const host = values.host ?? env('CLUSTER_HOST') ?? '127.0.0.1';

  if (values['print-nginx']) {
    const specs = planLayout(layout, basePort);
    const at = (p: number) => `${host}:${p}`;
    process.stdout.write(
      renderNginxSite({
        httpListen: at(httpPort),
        grpcListen: at(grpcPort),
        api: specs.filter((s) => s.role === 'api').map((s) => at(s.port)),
        auth: specs.filter((s) => s.role === 'auth').map((s) => at(s.port)),
        grpc: specs.filter((s) => s.role === 'grpc').map((s) => at(s.grpcPort)),
      }),
    );
    return 0;
  }

  // Handlers first: a signal while the cluster starts stops what has started (processes, nginx)
  // instead of killing this process alone and leaving its children running.
  const aborting = new AbortController();
  let stopRequested: ((signal: NodeJS.Signals) => void) | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopRequested) stopRequested(signal);
    else if (!aborting.signal.aborted) {
      process.stderr.write(`atrium cluster: ${signal} while starting; stopping what has started\n`);
      aborting.abort();
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await startAndRun();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }

  async function startAndRun(): Promise<number> {
    let cluster: Cluster;
    try {
      cluster = await Cluster.start({
        databaseUrl:
          values['database-url'] ??
          env('CLUSTER_DATABASE_URL') ??
          'postgres://postgres@127.0.0.1:5432/atrium_cluster',
        redisUrl: values['redis-url'] ?? env('CLUSTER_REDIS_URL') ?? 'redis://127.0.0.1:6379',
        layout,
        host,
        httpPort,
        grpcPort,
        basePort,
        nginxBinary: values.nginx ?? env('CLUSTER_NGINX') ?? '/usr/sbin/nginx',
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
    cluster.watch((exit) => {
      const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
      const ports = exit.grpcPort ? `port ${exit.port}, gRPC ${exit.grpcPort}` : `port ${exit.port}`;
      process.stderr.write(
        `atrium cluster: ${exit.name} (role ${exit.role}, ${ports}) exited with ${how} and is not restarted; ` +
          `its log: ${exit.log}; to bring it back, stop the cluster (Ctrl-C) and start it again\n`,
      );
    });
    process.stderr.write(`atrium cluster: ready at ${cluster.httpUrl}; Ctrl-C stops everything\n`);

    return new Promise<number>((resolve) => {
      stopRequested = () => {
        stopRequested = () => undefined;
        process.stderr.write('atrium cluster: stopping\n');
        started.stop().then(
          () => resolve(0),
          (err: unknown) => {
            process.stderr.write(`atrium cluster: ${(err as Error).message}\n`);
            resolve(1);
          },
        );
      };
    });
  }
}
