import { createServer } from 'node:net';
import { ConfigError } from '../config/schema.js';
import { listenRefusal } from '../process/listen-errors.js';

/** A port the cluster will listen on (nginx or one of its processes) and the variable that chose it. */
export interface PlannedPort {
  port: number;
  /** CLUSTER_HTTP_PORT, CLUSTER_GRPC_PORT or CLUSTER_BASE_PORT. */
  setting: string;
  /** Who listens there, for the message: "nginx (HTTP)", "api-1". */
  listener: string;
}

function tryListen(host: string, port: number): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', resolve);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/**
 * Checks every planned port before anything starts. Without it a taken port showed up only after
 * the migration and six processes, as nginx's bind retries (or one child's exit) wrapped in an
 * internal error. A port freed between this check and the start can still fail there.
 */
export async function assertPortsFree(host: string, planned: readonly PlannedPort[]): Promise<void> {
  for (const { port, setting, listener } of planned) {
    const err = await tryListen(host, port);
    if (err)
      throw listenRefusal(err, { host, port, portSetting: setting, hostSetting: 'CLUSTER_HOST', listener });
  }
}

/** The flag that sets each cluster port variable, for messages. */
const FLAG: Record<string, string> = {
  CLUSTER_HTTP_PORT: '--http-port',
  CLUSTER_GRPC_PORT: '--grpc-port',
  CLUSTER_BASE_PORT: '--base-port',
};
const named = (setting: string) => (FLAG[setting] ? `${setting} (${FLAG[setting]})` : setting);

/**
 * Refuses a plan that cannot work whatever else runs on the machine: two of the cluster's own
 * listeners on one port (binding each planned port alone, as assertPortsFree does, cannot see that,
 * and nginx then failed its bind while the process on that port answered its readiness check), or a
 * process port past 65535 (the base port plus the layout overflows).
 */
export function assertPlanFits(planned: readonly PlannedPort[]): void {
  for (const p of planned) {
    if (p.port > 65535)
      throw new ConfigError(
        p.setting,
        `a port that leaves room for every process: ${p.listener} would get ${p.port}, past 65535`,
        String(planned.find((q) => q.setting === p.setting)?.port ?? p.port),
      );
  }
  const seen = new Map<number, PlannedPort>();
  for (const p of planned) {
    // 0: any free port (tests), so never the same as another.
    if (p.port === 0) continue;
    const first = seen.get(p.port);
    if (first) {
      const settings =
        first.setting === p.setting ? named(p.setting) : `${named(first.setting)} and ${named(p.setting)}`;
      throw new ConfigError(
        p.setting,
        `a port no other listener of the cluster takes: ${settings} give ${first.listener} and ${p.listener} the same port ${p.port}`,
        String(p.port),
      );
    }
    seen.set(p.port, p);
  }
}
