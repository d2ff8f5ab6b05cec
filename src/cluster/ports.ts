import { createServer } from 'node:net';
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
