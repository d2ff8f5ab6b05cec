import { createServer } from 'node:net';
import { ConfigError } from '../config/schema.js';

/** A port the cluster will listen on (nginx or one of its processes) and the setting that chose it. */
export interface PlannedPort {
  port: number;
  /** The variable (and flag) to change when it cannot be used, e.g. CLUSTER_HTTP_PORT (--http-port). */
  setting: string;
  /** Who listens there, for the message: "nginx (HTTP)", "api-1". */
  user: string;
}

function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/**
 * Checks every planned port before anything starts. Without it a taken port showed up only after
 * the migration and six processes, as nginx's bind retries (or one child's exit) wrapped in an
 * internal error. A port freed between this check and the start can still fail there.
 */
export async function assertPortsFree(host: string, planned: readonly PlannedPort[]): Promise<void> {
  for (const { port, setting, user } of planned) {
    const err = await tryListen(host, port);
    if (!err) continue;
    const variable = setting.split(' ')[0]!;
    throw new ConfigError(
      variable,
      `a port that ${user} can listen on at ${host}, set by ${setting} (${host}:${port}: ${err.code ?? err.message})`,
      String(port),
    );
  }
}
