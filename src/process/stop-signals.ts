import type { Logger } from 'pino';

/** docs/deployment.md: "A drain still running after 30 s exits 1". */
export const DRAIN_LIMIT_MS = 30_000;

export interface StopOnSignalsOptions {
  /** The drain (Atrium.close). */
  close(): Promise<void>;
  logger: Logger;
  /** DRAIN_LIMIT_MS unless a test says otherwise. */
  limitMs?: number;
  /** Ends the process (process.exit unless a test says otherwise); called once the logs are flushed. */
  exit?: (code: number) => void;
  /** Where the signals come from (process unless a test says otherwise). */
  signals?: Pick<NodeJS.EventEmitter, 'on'>;
}

/**
 * The first SIGTERM or SIGINT drains; the promise then resolves with the exit status (0 drained, 1
 * the drain failed) and the process ends on its own once nothing holds it.
 *
 * The limit really ends the process: when the drain is still running after `limitMs`, or has ended
 * but something still holds the process open (a socket, a pool, a timer nobody closed), the logs are
 * flushed and process.exit is called (1 for a drain still running). Setting process.exitCode is not
 * enough: a drain that hangs keeps its handles, and they keep the process alive for ever.
 *
 * The same signal a second time during the drain exits 1 at once, as an operator pressing Ctrl-C
 * twice (or a supervisor asking again) expects. The other signal does not: a Ctrl-C on `atrium
 * cluster` sends SIGINT to the whole terminal's process group, and the cluster then sends each of its
 * processes SIGTERM, which must not cut their drain short.
 */
export function stopOnSignals(options: StopOnSignalsOptions): Promise<number> {
  const { close, logger: log } = options;
  const limitMs = options.limitMs ?? DRAIN_LIMIT_MS;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const signals = options.signals ?? process;
  let exiting = false;
  let limit: NodeJS.Timeout | undefined;
  const exitNow = (code: number) => {
    if (exiting) return;
    exiting = true;
    clearTimeout(limit);
    // pino writes to stderr synchronously by default; flush covers an asynchronous destination.
    let done = false;
    const end = () => {
      if (done) return;
      done = true;
      exit(code);
    };
    try {
      log.flush(() => end());
    } catch {
      end();
    }
    // A destination that never calls back must not keep the process alive either.
    setTimeout(end, 1_000).unref();
  };

  return new Promise<number>((resolve) => {
    let first: string | undefined;
    let outcome: number | undefined;
    const stop = (signal: string) => {
      if (first === signal) {
        log.warn({ signal }, 'second signal while draining; exiting now');
        exitNow(1);
        return;
      }
      if (first !== undefined) {
        // Ctrl-C on `atrium cluster` in a terminal: the SIGINT reaches every process of the
        // foreground group, then the cluster asks each of its processes to stop with SIGTERM.
        log.info({ signal, first }, 'already draining');
        return;
      }
      first = signal;
      log.info({ signal }, 'draining');
      // Unref'd: it never delays an exit that nothing else holds up.
      limit = setTimeout(() => {
        if (outcome === undefined) {
          log.error({ limit_ms: limitMs }, 'drain took too long; exiting');
          exitNow(1);
        } else {
          log.warn({ limit_ms: limitMs }, 'drain ended but something still holds the process open; exiting');
          exitNow(outcome);
        }
      }, limitMs).unref();
      close().then(
        () => {
          log.info('stopped');
          outcome = 0;
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err }, 'error while stopping');
          outcome = 1;
          resolve(1);
        },
      );
    };
    signals.on('SIGTERM', () => stop('SIGTERM'));
    signals.on('SIGINT', () => stop('SIGINT'));
  });
}

/** Where bin/atrium.js leaves the listeners it sets before the modules load. */
export const EARLY_SIGNALS = Symbol.for('atrium.earlySignals');

/**
 * SIGTERM or SIGINT while `serve` is still starting (loading, migrations, connections, binding).
 * Without a handler the signal killed the process (status 143, no log line), not the "drains and
 * exits 0" the README promises. Nothing has been served yet, so there is nothing to drain: the
 * start is abandoned, the line logged and the process ends 0 (the database's own transactions undo a
 * migration cut short; the SQLite serve lock is the system's and ends with the process). Returns
 * the hand-over: call it once stopOnSignals has the signals.
 */
export function watchStartSignals(
  logger: Logger,
  options: Pick<StopOnSignalsOptions, 'exit'> = {},
): () => void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  // bin/atrium.js listened from the first line; from here this process does.
  (globalThis as Record<symbol, (() => void) | undefined>)[EARLY_SIGNALS]?.();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'signal while starting; stopped before serving');
    let done = false;
    const end = () => {
      if (done) return;
      done = true;
      exit(0);
    };
    try {
      logger.flush(() => end());
    } catch {
      end();
    }
    setTimeout(end, 1_000).unref();
  };
  const onTerm = () => stop('SIGTERM');
  const onInt = () => stop('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return () => {
    process.off('SIGTERM', onTerm);
    process.off('SIGINT', onInt);
  };
}
