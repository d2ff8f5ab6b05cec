import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { root } from '../helpers/cli.js';
import { sharedDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * README: SIGTERM before `atrium started` abandons the start (exit 0, a log line); after it, the
 * process drains (exit 0). A signal at the wrong moment of the start was lost: the start handed the
 * signals from one process listener to the next by removing one and adding another, Node dropped a
 * signal still waiting for the removed one, and the process went on to serve and never exited. The
 * built CLI; one process per moment, each sent SIGTERM once: at every line the start logs, and at
 * spread fractions of one measured start (the module loading before the first line has no line of
 * its own). Whichever side of the hand-over the signal lands on, it must end the process with 0 and
 * a line naming it.
 */

interface Line {
  msg: string;
  signal?: string;
}

interface Run {
  code: number | null;
  lines: Line[];
  stderr: string;
  /** When "atrium started" was logged, in ms from the spawn (no signal sent). */
  startedAfterMs?: number;
}

/** A line as every start logs it: the ports bound differ. */
const shape = (msg: string) => msg.replace(/:\d+/g, ':PORT');

/** Long enough for any drain of an idle process; a process alive after it lost the signal. */
const LOST_AFTER_MS = 25_000;

function runServe(
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

describe('a SIGTERM at any moment of the start', { timeout: 600_000 }, () => {
  let database: TestDatabase;
  beforeAll(async () => {
    ensureBuilt();
    database = await sharedDatabase();
  });
  afterAll(() => database?.drop());

  it('abandons the start or drains, and exits 0 with a line for the signal', async () => {
    const env = { DATABASE_URL: database.url };
    // The first start migrates; the one measured is a start as it usually is.
    const first = await runServe(env, undefined);
    expect(first.code, first.stderr).toBe(0);
    const measured = await runServe(env, undefined);
    expect(measured.code, measured.stderr).toBe(0);
    const upToStarted = measured.lines.slice(
      0,
      measured.lines.findIndex((l) => l.msg === 'atrium started') + 1,
    );
    const startLines = [...new Set(upToStarted.map((l) => shape(l.msg)))];
    const moments: Array<{ line: string } | { afterMs: number }> = [
      ...startLines.map((line) => ({ line })),
      ...Array.from({ length: 8 }, (_, i) => ({
        afterMs: Math.round((measured.startedAfterMs! * (i + 2)) / 8),
      })),
    ];
    const failures: string[] = [];
    for (const moment of moments) {
      const run = await runServe(env, moment);
      const line = run.lines.find((l) => l.signal === 'SIGTERM');
      const started = run.lines.some((l) => l.msg === 'atrium started');
      const expected = started ? 'draining' : 'signal while starting; stopped before serving';
      if (run.code !== 0 || line?.msg !== expected)
        failures.push(
          `${JSON.stringify(moment)}: exit ${run.code}, lines ${run.lines.map((l) => l.msg).join(' | ')}`,
        );
    }
    expect(failures).toEqual([]);
  });
});
