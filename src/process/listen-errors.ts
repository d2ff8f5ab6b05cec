import { ConfigError } from '../config/schema.js';

/** Where a listener was to bind, and the settings that chose the address, as the error names them. */
export interface ListenTarget {
  host: string;
  port: number;
  /** `PORT`, `GRPC_PORT`, or the cluster's `CLUSTER_HTTP_PORT`, ... */
  portSetting: string;
  /** `HOST`, or the cluster's `CLUSTER_HOST`. */
  hostSetting: string;
  /** Who was to listen, when a setting serves several listeners (the cluster's "api-2"). */
  listener?: string;
}

/**
 * A listen the system refuses (the port taken, the address not this machine's or a name that does
 * not resolve, a privileged port)
 * is fixed by changing a setting, so it stops the start as that setting's error, naming the
 * variable, like every other bad setting. grpc-js reports the cause only inside its message text.
 */
export function listenRefusal(err: unknown, target: ListenTarget): unknown {
  const { host, port, portSetting, hostSetting, listener } = target;
  const code = (err as { code?: unknown } | null)?.code;
  const text = err instanceof Error ? err.message : String(err);
  const is = (name: string) => code === name || text.includes(name);
  const wanted = listener ? `a port that ${listener} can listen on at ${host}` : `a port free on ${host}`;
  if (is('EADDRINUSE')) {
    return new ConfigError(
      portSetting,
      `${wanted} (another process listens on ${host}:${port}: EADDRINUSE)`,
      String(port),
    );
  }
  if (is('EADDRNOTAVAIL')) {
    return new ConfigError(hostSetting, `an address of this machine (EADDRNOTAVAIL)`, host);
  }
  // A host name that does not resolve: Node's getaddrinfo codes, or grpc-js's words for the same.
  if (is('ENOTFOUND') || is('EAI_AGAIN') || text.includes('Name resolution failed')) {
    return new ConfigError(hostSetting, `an address of this machine or a name that resolves to one`, host);
  }
  if (is('EACCES')) {
    return new ConfigError(
      portSetting,
      `a port this user may open${listener ? ` for ${listener}` : ''} (ports below 1024 need privileges: EACCES)`,
      String(port),
    );
  }
  return err;
}
