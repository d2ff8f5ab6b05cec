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
  /** Where the signals come from (the process's desk unless a test says otherwise). */
  signals?: Pick<NodeJS.EventEmitter, 'on'>;
  /** A signal the start already logged (it abandoned the start once built): drain now. */
  already?: StopSignal;
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
  let exiting = false;
  let limit: NodeJS.Timeout | undefined;
  const exitNow = (code: number) => {
    if (exiting) return;
    exiting = true;
    clearTimeout(limit);
    // pino writes to stderr synchronously by default; flush covers an asynchronous destination.
    exitAfterLog(log, code, exit);
  };

  return new Promise<number>((resolve) => {
    let first: string | undefined;
    let outcome: number | undefined;
    const stop = (signal: string) => {
      if (first !== undefined) {
        repeatedSignal(log, signal, first, 'draining', exitNow);
        return;
      }
      first = signal;
      if (signal !== options.already) log.info({ signal }, 'draining');
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
    if (options.signals) {
      options.signals.on('SIGTERM', () => stop('SIGTERM'));
      options.signals.on('SIGINT', () => stop('SIGINT'));
    } else stopSignalDesk().take(stop);
    if (options.already) stop(options.already);
  });
}

export type StopSignal = 'SIGTERM' | 'SIGINT';

/**
 * The process's one SIGTERM and SIGINT listener, installed once and never removed; what a signal
 * does is whatever handler was taken last, read when the signal is handled.
 *
 * Handing a signal over by removing one process listener and adding another lost signals (a start
 * that went on to serve after a SIGTERM, and never exited): Node closes its signal handle when the
 * last listener goes, and a signal that arrived while JavaScript was busy (loading the modules,
 * finishing the start), still waiting in libuv for that handle, is dropped with it. One listener
 * for the life of the process has no such moment.
 */
export interface StopSignalDesk {
  take(handler: (signal: StopSignal) => void): void;
}

/** Where bin/atrium.js leaves its desk: it listens from its first line, before the modules load. */
export const STOP_SIGNAL_DESK = Symbol.for('atrium.stopSignalDesk');

/** The process's desk: bin/atrium.js's, or one made now (the sources run through tsx). */
export function stopSignalDesk(): StopSignalDesk {
  const global = globalThis as Record<symbol, StopSignalDesk | undefined>;
  let desk = global[STOP_SIGNAL_DESK];
  if (!desk) {
    let handler: (signal: StopSignal) => void = () => undefined;
    const relay = (signal: StopSignal) => handler(signal);
    process.on('SIGTERM', relay);
    process.on('SIGINT', relay);
    desk = { take: (next) => void (handler = next) };
    global[STOP_SIGNAL_DESK] = desk;
  }
  return desk;
}

/**
 * A signal after the first of a stop, during the start or the drain: the same signal again ends the
 * process at once with 1 (Ctrl-C twice, a supervisor asking again); the other one is only logged
 * (Ctrl-C on `atrium cluster` in a terminal: the SIGINT reaches every process of the foreground
 * group, then the cluster asks each of its processes to stop with SIGTERM).
 */
function repeatedSignal(
  log: Logger,
  signal: string,
  first: string,
  phase: 'starting' | 'draining',
  exitNow: (code: number) => void,
): void {
  if (signal === first) {
    log.warn({ signal }, `second signal while ${phase}; exiting now`);
    exitNow(1);
  } else log.info({ signal, first }, phase === 'draining' ? 'already draining' : 'already stopping');
}

/** Flushes the log, then ends the process; a destination that never calls back does not hold it. */
function exitAfterLog(log: Logger, code: number, exit: (code: number) => void): void {
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
  setTimeout(end, 1_000).unref();
}

export interface StartSignals {
  /**
   * Something is built that a signal must close rather than leave to the exit (sockets that may be
   * bound, work that may have begun): from now on a signal is only recorded, and the start ends
   * itself at its next step (`abandoned`).
   */
  built(): void;
  /** The signal that abandoned the start once `built`, if one did. */
  abandoned(): StopSignal | undefined;
}

/**
 * SIGTERM or SIGINT while `serve` is still starting. Nothing has been served yet, so there is
 * nothing to drain: the start is abandoned with a log line and exit 0. Until `built`, that is at
 * once (loading, migrations, connections: the database's own transactions undo a migration cut
 * short; the SQLite serve lock is the system's and ends with the process). After `built` the start
 * closes what it made (serve.ts) before it exits, so nothing begun is cut short; meanwhile the same
 * signal a second time exits 1 at once and the other is only logged, as during a drain (stopOnSignals).
 * stopOnSignals then takes the desk over: the hand-over is one assignment, so every signal is the
 * start's or the drain's.
 */
export function watchStartSignals(
  logger: Logger,
  options: Pick<StopOnSignalsOptions, 'exit'> & { desk?: StopSignalDesk } = {},
): StartSignals {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let signalled: StopSignal | undefined;
  let built = false;
  (options.desk ?? stopSignalDesk()).take((signal) => {
    if (signalled) {
      // The start is closing what it made (once built): as during a drain (docs/deployment.md).
      repeatedSignal(logger, signal, signalled, 'starting', (code) => exitAfterLog(logger, code, exit));
      return;
    }
    signalled = signal;
    logger.info({ signal }, 'signal while starting; stopped before serving');
    if (!built) exitAfterLog(logger, 0, exit);
  });
  return {
    built: () => void (built = true),
    abandoned: () => (built ? signalled : undefined),
  };
}
