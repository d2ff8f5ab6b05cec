import { ConfigError } from '../config/schema.js';

/**
 * A listen the system refuses (the port taken, the address not this machine's, a privileged port)
 * is fixed by changing a setting, so it stops the start as that setting's error, naming the
 * variable, like every other bad setting. grpc-js reports the cause only inside its message text.
 */
export function listenRefusal(
  err: unknown,
  portVariable: 'PORT' | 'GRPC_PORT',
  host: string,
  port: number,
): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  const text = err instanceof Error ? err.message : String(err);
  const is = (name: string) => code === name || text.includes(name);
  if (is('EADDRINUSE')) {
    return new ConfigError(
      portVariable,
      `a port free on ${host} (another process listens on ${host}:${port}: EADDRINUSE)`,
      String(port),
    );
  }
  if (is('EADDRNOTAVAIL')) {
    return new ConfigError('HOST', `an address of this machine (EADDRNOTAVAIL)`, host);
  }
  if (is('EACCES')) {
    return new ConfigError(
      portVariable,
      `a port this user may open (ports below 1024 need privileges: EACCES)`,
      String(port),
    );
  }
  return err;
}
