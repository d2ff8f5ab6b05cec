import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { sharedDatabase, type TestDatabase } from '../helpers/database.js';
import { runServe, shape } from '../helpers/serve-signal.js';
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
