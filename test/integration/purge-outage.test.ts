import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PURGE_KINDS, PurgeJob, type PurgeKind } from '../../src/maintenance/purge.js';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import {
  postgresMissing,
  startAtriumBehindProxy,
  type AtriumBehindProxy,
  poolEmptied,
  engineOutageError,
} from '../helpers/database-outage.js';
import { memoryLog } from '../helpers/memory-log.js';

/**
 * docs/deployment.md, "What is logged while PostgreSQL is away": the purge job logs a database
 * outage once (a warning with the driver's message and code, no stack) and once when a batch
 * answers again, not one warning with a stack per kind every ten-minute run; any other failure of
 * a kind is still logged in full, every run.
 */

const OUTAGE = 'database unreachable: purge paused, retrying next run (not logged again until it answers)';
const BACK = 'database answers again: purge resumed';
const FAILED = 'purge failed; retrying next run';

type Line = Record<string, unknown>;
const messages = (lines: Line[]) => lines.map((l) => l.msg);

const skip = await postgresMissing();

describe.skipIf(skip !== undefined)('the purge job while PostgreSQL is unreachable', () => {
  const log = memoryLog('info');
  let behind: AtriumBehindProxy;
  let job: PurgeJob;

  beforeAll(async () => {
    // No role of its own: the test runs the job, the real one, against the store behind the proxy.
    behind = await startAtriumBehindProxy({}, ['auth']);
    job = new PurgeJob({ ...behind.atrium.services, logger: log.logger });
  });
  afterAll(() => behind?.stop());

  it('logs one line when it goes, with its code and no stack, and one when a run gets through', async () => {
    const every = Object.fromEntries(PURGE_KINDS.map((k) => [k.name, 0]));
    expect(await job.runOnce()).toEqual(every);
    expect(log.lines).toEqual([]);

    await behind.cutDatabase();
    // The pool drops the connections the proxy cut: the next statement meets a refused connection.
    await poolEmptied(behind.atrium.services.store);
    // Three ten-minute runs of five kinds each.
    for (let run = 0; run < 3; run++) expect(await job.runOnce()).toEqual(every);
    expect(messages(log.lines)).toEqual([OUTAGE]);
    expect(log.lines[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED' });
    expect(log.lines[0]!.err).toMatch(/ECONNREFUSED/);
    expect(JSON.stringify(log.lines)).not.toContain('stack');

    await behind.restoreDatabase();
    expect(await job.runOnce()).toEqual(every);
    expect(messages(log.lines)).toEqual([OUTAGE, BACK]);
    // One failure per run: the first kind's ends the run, the others would meet the same outage.
    expect(log.lines[1]).toMatchObject({ level: 40, failures: 3 });
  }, 30_000);
});

describe('the purge job when a kind fails', () => {
  const log = memoryLog('info');
  let atrium: TestAtrium;
  let failure: Error | undefined;
  let reached = 0;
  const kinds: PurgeKind[] = [
    {
      name: 'failing',
      async batch(db) {
        await db.selectFrom('settings').select('key').limit(1).execute();
        if (failure) throw failure;
        return 0;
      },
    },
    {
      name: 'next',
      async batch(db) {
        await db.selectFrom('settings').select('key').limit(1).execute();
        reached += 1;
        return 0;
      },
    },
  ];

  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['auth']);
  });
  afterAll(() => atrium?.stop());

  it('logs an outage once (SQLite: busy; PostgreSQL: terminated) and anything else in full, every run', async () => {
    const job = new PurgeJob({ ...atrium.services, logger: log.logger }, { kinds });
    const outage = engineOutageError();
    const broken = Object.assign(new Error('relation "settings" does not exist'), { code: '42P01' });

    failure = outage;
    await job.runOnce();
    await job.runOnce();
    // The outage ended each run at its first kind.
    expect(reached).toBe(0);
    expect(messages(log.lines)).toEqual([OUTAGE]);
    expect(log.lines[0]).toMatchObject({
      level: 40,
      err: outage.message,
      code: (outage as Error & { code: string }).code,
    });

    failure = broken;
    await job.runOnce();
    await job.runOnce();
    // Not an outage: the next kind runs, and its answer ends the outage that was logged.
    expect(reached).toBe(2);
    expect(messages(log.lines)).toEqual([OUTAGE, FAILED, BACK, FAILED]);
    for (const line of [log.lines[1]!, log.lines[3]!]) {
      expect(line).toMatchObject({ level: 40, kind: 'failing' });
      expect(line.err).toMatchObject({ code: '42P01', message: broken.message });
      expect((line.err as { stack: string }).stack).toContain('Error: relation');
    }
    expect(log.lines[2]).toMatchObject({ failures: 2 });
  });
});
