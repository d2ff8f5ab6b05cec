import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import {
  behindProxyForSuite,
  engineOutageError,
  FailingStatements,
  postgresMissing,
} from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { forSuite } from '../../helpers/suite.js';
import { until } from '../../helpers/wait.js';

/**
 * docs/webhooks.md, "Metrics": /metrics answers, with every figure but the two backlog gauges,
 * whatever the database does. Those two are read from the database at scrape time; when that read
 * fails or does not answer within BACKLOG_READ_BUDGET_MS (1 s) they are left out of the scrape and
 * `atrium_webhook_backlog_read_ok` is 0. They used to fail the whole registry: 503 while
 * PostgreSQL was down, and a scrape held until the request's deadline (30 s) while it hung, so
 * `atrium_redis_up` and the 503 counters were invisible exactly during an outage.
 */

/**
 * How long the client waits for a scrape: under Prometheus's default scrape timeout (10 s), which is
 * what the scrape must meet, and far from the 30 s a hung read held it before. Not a speed check:
 * the 1 s budget leaves a loaded CI machine all the rest.
 */
const SCRAPE_TIMEOUT_MS = 9_000;

async function scrape(httpUrl: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${httpUrl}/metrics`, { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
  return { status: res.status, body: await res.text() };
}

/** The value of the sample `name` (with its labels, if any) in a scrape, or undefined if absent. */
function sample(body: string, name: string): number | undefined {
  const line = body.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

const PENDING = 'atrium_webhook_pending_deliveries';
const OLDEST = 'atrium_webhook_outbox_oldest_undispatched_seconds';
const READ_OK = 'atrium_webhook_backlog_read_ok';

/** Everything but the backlog gauges is there; those two are absent and read_ok says so. */
function expectScrapeWithoutBacklog(body: string) {
  expect(sample(body, READ_OK)).toBe(0);
  expect(sample(body, PENDING)).toBeUndefined();
  expect(sample(body, OLDEST)).toBeUndefined();
  // Still described, so the scrape says which series it left out.
  expect(body).toContain(`# TYPE ${PENDING} gauge`);
  expect(sample(body, 'atrium_redis_up')).toBe(1);
  expect(body).toContain('atrium_shared_state_degraded_total');
  expect(body).toMatch(/^atrium_http_requests_total\{/m);
  expect(body).toMatch(/^atrium_process_cpu_seconds_total /m);
}

/** Waits until a scrape has the backlog gauges (the first reads after an outage may still fail). */
async function backlogRead(httpUrl: string): Promise<string> {
  let body = '';
  await until(async () => {
    const scraped = await scrape(httpUrl);
    body = scraped.body;
    return scraped.status === 200 && sample(body, PENDING) !== undefined;
  }, 'a scrape with the backlog gauges');
  expect(sample(body, PENDING)).toBe(0);
  expect(sample(body, OLDEST)).toBe(0);
  return body;
}

const skip = await postgresMissing();

describe.skipIf(skip !== undefined)('/metrics while PostgreSQL is down or hangs', () => {
  const behind = behindProxyForSuite({ REDIS_URL: TEST_REDIS_URL });

  /**
   * A request that needs the database: a well-formed API key (its checksum holds), so it is looked
   * up there. A 503 during the outage.
   */
  const request = () => {
    const random = randomBytes(16).toString('hex');
    const key = `atr_test_${random}_${createHash('sha256').update(`test:${random}`).digest('hex').slice(0, 6)}`;
    return fetch(`${behind.httpUrl}/v1/users/usr_00000000000000000000000000`, {
      headers: { 'x-api-key': key },
    });
  };

  it('answers 200 with every other metric while PostgreSQL refuses connections', async () => {
    await backlogRead(behind.httpUrl);
    await behind.cutDatabase();
    try {
      expect((await request()).status).toBe(503);
      const { status, body } = await scrape(behind.httpUrl);
      expect(status).toBe(200);
      expectScrapeWithoutBacklog(body);
      // The outage's own figure, the one operators look for.
      expect(body).toMatch(/^atrium_http_requests_total\{[^}]*status="503"\} [1-9]/m);
    } finally {
      await behind.restoreDatabase();
    }
    expect(sample(await backlogRead(behind.httpUrl), READ_OK)).toBe(1);
  });

  it('answers 200 with every other metric while PostgreSQL hangs, and keeps one read waiting, not one per scrape', async () => {
    await backlogRead(behind.httpUrl);
    const store = behind.atrium.services.store;
    const busy = () => {
      const stats = store.poolStats()!;
      return stats.total - stats.idle;
    };
    const busyBefore = busy();
    behind.hangDatabase();
    try {
      for (let i = 0; i < 3; i++) {
        const { status, body } = await scrape(behind.httpUrl);
        expect(status).toBe(200);
        expectScrapeWithoutBacklog(body);
      }
      // The three scrapes share the one read that waits on the hung database.
      expect(busy()).toBeLessThanOrEqual(busyBefore + 1);
    } finally {
      behind.resumeDatabase();
    }
    expect(sample(await backlogRead(behind.httpUrl), READ_OK)).toBe(1);
  }, 60_000);
});

describe('/metrics when the backlog read fails (the run’s engine)', () => {
  const log = memoryLog('info');
  const failing = new FailingStatements();
  const atrium = forSuite(
    async () => {
      const started: TestAtrium = await startTestAtrium({}, ['api'], {
        logger: log.logger,
        storePlugins: [failing],
      });
      const { httpUrl } = await started.listen();
      return Object.assign(started, { httpUrl: httpUrl! });
    },
    async (started) => {
      failing.failing = undefined;
      await started.stop();
    },
  );
  const errors = () => log.lines.filter((l) => l.msg === 'webhook backlog gauges: read failed');

  it('leaves the backlog gauges out and logs nothing for an outage (SQLite: busy; PostgreSQL: terminated)', async () => {
    failing.failing = engineOutageError();
    try {
      const { status, body } = await scrape(atrium.httpUrl);
      expect(status).toBe(200);
      expect(sample(body, READ_OK)).toBe(0);
      expect(sample(body, PENDING)).toBeUndefined();
      expect(sample(body, OLDEST)).toBeUndefined();
      expect(body).toMatch(/^atrium_process_cpu_seconds_total /m);
    } finally {
      failing.failing = undefined;
    }
    expect(errors()).toEqual([]);
    const { body } = await scrape(atrium.httpUrl);
    expect(sample(body, READ_OK)).toBe(1);
    expect(sample(body, PENDING)).toBe(0);
  });

  it('logs any other failure in full, each time', async () => {
    failing.failing = Object.assign(new Error('relation "events" does not exist'), { code: '42P01' });
    try {
      for (let i = 0; i < 2; i++) {
        const { status, body } = await scrape(atrium.httpUrl);
        expect(status).toBe(200);
        expect(sample(body, READ_OK)).toBe(0);
        expect(sample(body, PENDING)).toBeUndefined();
      }
    } finally {
      failing.failing = undefined;
    }
    expect(errors()).toHaveLength(2);
    expect(errors()[0]).toMatchObject({
      level: 50,
      err: { code: '42P01', message: 'relation "events" does not exist' },
    });
  });
});
