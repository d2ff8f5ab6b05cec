import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { root } from './cli.js';

/**
 * The built `atrium serve`, sent SIGTERM once: when it logs a given line (its shape: ports masked),
 * `afterMs` after the spawn, or (neither) when it logs "atrium started", measuring how long that took.
 */
export interface Line {
  msg: string;
  signal?: string;
}

export interface Run {
  code: number | null;
  lines: Line[];
  stderr: string;
  /** When "atrium started" was logged, in ms from the spawn (no signal sent). */
  startedAfterMs?: number;
}

/** A line as every start logs it: the ports bound differ. */
export const shape = (msg: string) => msg.replace(/:\d+/g, ':PORT');

/** Long enough for any drain of an idle process; a process alive after it lost the signal. */
export const LOST_AFTER_MS = 25_000;

export function runServe(
  env: Record<string, string>,
  signalAt: { line: string } | { afterMs: number } | undefined,
): Promise<Run> {
  return new Promise((resolve) => {
    const spawned = Date.now();
    const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve'], {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOST: '127.0.0.1',
        PORT: '0',
        GRPC_PORT: '0',
        LOG_LEVEL: 'info',
        ...env,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    let sent = false;
    let startedAfterMs: number | undefined;
    // Never left running: a line that does not come (or a signal lost) ends in SIGKILL and a failure.
    let lost = setTimeout(() => child.kill('SIGKILL'), 4 * LOST_AFTER_MS);
    const signal = () => {
      if (sent) return;
      sent = true;
      child.kill('SIGTERM');
      clearTimeout(lost);
      lost = setTimeout(() => child.kill('SIGKILL'), LOST_AFTER_MS);
    };
    if (signalAt && 'afterMs' in signalAt) setTimeout(signal, signalAt.afterMs);
    let pending = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      pending += chunk.toString();
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const text = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!text.startsWith('{')) continue;
        const { msg } = JSON.parse(text) as Line;
        if (signalAt && 'line' in signalAt && shape(msg) === signalAt.line) signal();
        if (!signalAt && msg === 'atrium started') {
          startedAfterMs = Date.now() - spawned;
          signal();
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(lost);
      const lines = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
      resolve({ code, lines, stderr, startedAfterMs });
    });
  });
}
