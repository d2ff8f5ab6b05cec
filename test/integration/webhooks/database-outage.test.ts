import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Services } from '../../../src/compose.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import {
  postgresMissing,
  startAtriumBehindProxy,
  type AtriumBehindProxy,
  engineOutageError,
} from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { ADDRESS } from '../orders/fixtures.js';
import { Receiver, sleep } from './support.js';
import { until } from '../../helpers/wait.js';

/**
 * docs/webhooks.md, "When the database is away": the worker's poll, fan-out, outcome writes and
 * wake-up connection log a database outage once (a warning with the error's message and code, no
 * stack) and once when the database answers again, not one error with a stack per poll; an error
 * that is not about reaching the database is still logged in full, every time.
 */

/** The worker's default poll. */
const POLL_MS = 500;
const OUTAGE = 'database unreachable: webhook delivery paused, retrying (not logged again until it answers)';
const BACK = 'database answers again: webhook delivery resumed';

type Line = Record<string, unknown>;
/**
 * The worker's outage lines. The purge job of the same role logs an outage it meets with lines of its
 * own (its start run can still be going, or fall due, while the database is cut); those are
 * test/integration/purge-outage.test.ts's to check. Each delivery attempt's own line is
 * test/integration/webhooks/attempt-log.test.ts's.
 */
const workerLines = (lines: Line[]) =>
  lines.filter((l) => !String(l.msg).includes(': purge ') && l.msg !== 'webhook attempt');
const messages = (lines: Line[]) => workerLines(lines).map((l) => l.msg);

/** A product, a user with an endpoint at `receiver`'s `/w`, and a way to make one order (one event). */
async function shop(services: Services, receiver: Receiver) {
  const product = await services.core.products.create({ name: 'Widget', priceCents: 1000 });
  const handle = `outage${process.pid}x${Math.random().toString(36).slice(2, 8)}`;
  const user = await services.core.users.create({ handle, email: `${handle}@example.com` });
  await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, { url: receiver.url('/w'), userId: user.id });
  return async () => {
    await services.core.orders.create(
      { id: user.id, kind: 'user', role: 'member' },
      {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'USD',
        shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
      },
    );
  };
}

/** Resolves once `n` deliveries have their outcome written as delivered. */
async function deliveredCount(services: Services, n: number) {
  await until(
    async () => {
      const rows = await services.store.db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('status', '=', 'delivered')
        .execute();
      return rows.length === n;
    },
    `${n} deliveries recorded as delivered`,
    10_000,
  );
}

const skip = await postgresMissing();

describe.skipIf(skip !== undefined)('the webhook worker while PostgreSQL is unreachable', () => {
  const log = memoryLog('info');
  let behind: AtriumBehindProxy;
  let receiver: Receiver;
  let order: () => Promise<void>;

  beforeAll(async () => {
    behind = await startAtriumBehindProxy({ WEBHOOK_BACKOFF_BASE_MS: '1000' }, ['worker'], {
      logger: log.logger,
    });
    receiver = await new Receiver().start();
    order = await shop(behind.atrium.services, receiver);
  });
  afterAll(async () => {
    await behind?.stop();
    await receiver?.stop();
  });

  it('logs one line when it goes, one when it is back, and delivers afterwards', async () => {
    // The first event's first attempt fails: its retry falls due (1 s later) during the outage.
    receiver.responder = (_r, nth) => ({ status: nth === 1 ? 500 : 200 });
    await order();
    await receiver.until((all) => all.length === 1);
    const retryPending = async () => {
      const row = await behind.atrium.services.store.db
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempt_count'])
        .executeTakeFirst();
      return row?.status === 'pending' && row.attempt_count === 1;
    };
    await until(retryPending, 'the failed attempt recorded', 10_000);
    const before = log.lines.length;

    await behind.cutDatabase();
    // Eight polls, and the LISTEN connection's reconnect attempts (one a second), all failing.
    await sleep(8 * POLL_MS);
    const during = workerLines(log.lines.slice(before));
    expect(messages(during)).toEqual([OUTAGE]);
    const line = during[0]!;
    expect(line.level).toBe(40);
    // The first failure is a refused connection, or a pooled one dropped (node-postgres gives that no
    // code): in the read that saw it go, or, when it went while the client sat lent between two
    // statements, in the next one ("not queryable"), as test/integration/graphql/outage-log.test.ts allows.
    expect(line.err).toMatch(/ECONNREFUSED|ECONNRESET|Connection terminated|not queryable/);
    if (line.code !== undefined)
      expect(line.code).toMatch(/^(ECONNREFUSED|ECONNRESET|EPIPE|57P0\d|08\d\d\d)$/);
    expect(JSON.stringify(during)).not.toContain('"stack"');

    await behind.restoreDatabase();
    // The retry that fell due meanwhile goes out, and new events are delivered.
    await receiver.until((all) => all.length === 2, 15_000);
    expect(receiver.received[1]!.attempt).toBe(2);
    await order();
    await receiver.until((all) => all.length === 3, 15_000);
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE, BACK]);
    const back = workerLines(log.lines.slice(before))[1]!;
    expect(back.downMs).toBeGreaterThanOrEqual(8 * POLL_MS - 100);
    expect(back.failures).toBeGreaterThanOrEqual(8);
  }, 60_000);
});

/**
 * Fails every statement on the webhook tables (built or raw SQL), after it ran, with `error` while it is set (the
 * purge job of the worker role, which runs at start, touches other tables and is left alone).
 */
class FailStatements implements KyselyPlugin {
  error: Error | undefined;
  readonly #webhook = new Set<string>();
  transformQuery({ node, queryId }: PluginTransformQueryArgs) {
    if (
      /\b(events|webhook_[a-z_]+|delivery_attempts)\b/.test(
        JSON.stringify(node, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
      )
    )
      this.#webhook.add(queryId.queryId);
    return node;
  }
  async transformResult({ result, queryId }: PluginTransformResultArgs) {
    const webhook = this.#webhook.delete(queryId.queryId);
    if (webhook && this.error) throw this.error;
    return result;
  }
}

describe('the webhook worker when its statements fail', () => {
  const log = memoryLog('info');
  const fail = new FailStatements();
  let atrium: TestAtrium;
  let receiver: Receiver;
  let order: () => Promise<void>;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['worker'], { logger: log.logger, storePlugins: [fail] });
    receiver = await new Receiver().start();
    order = await shop(atrium.services, receiver);
  });
  afterAll(async () => {
    fail.error = undefined;
    await atrium?.stop();
    await receiver?.stop();
  });

  it('logs the database being away once, and once when it answers (SQLite: busy; PostgreSQL: terminated)', async () => {
    const before = log.lines.length;
    fail.error = engineOutageError();
    await sleep(6 * POLL_MS);
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE]);
    expect(log.lines[before]).toMatchObject({
      level: 40,
      err: fail.error.message,
      code: (fail.error as Error & { code: string }).code,
    });

    fail.error = undefined;
    await until(() => log.lines.length > before + 1, 'the recovery line', 10_000);
    await order();
    await receiver.until((all) => all.length === 1);
    await deliveredCount(atrium.services, 1);
    expect(messages(log.lines.slice(before))).toEqual([OUTAGE, BACK]);
  });

  it('logs an error that is not about reaching the database in full, every time', async () => {
    const before = log.lines.length;
    fail.error = Object.assign(new Error('relation "webhook_deliveries" does not exist'), { code: '42P01' });
    // Three failed passes or fan-outs, each logged: two seconds of polls made them, until a loaded
    // machine ran fewer polls in those two seconds.
    await until(() => log.lines.length - before >= 3, 'three failures logged', 15_000);
    fail.error = undefined;
    const during = log.lines.slice(before);
    expect(during.length).toBeGreaterThanOrEqual(3);
    for (const line of during) {
      expect(line.level).toBe(50);
      expect(['webhook worker pass failed', 'webhook fan-out failed']).toContain(line.msg);
      expect(line.err).toMatchObject({
        code: '42P01',
        message: 'relation "webhook_deliveries" does not exist',
      });
      expect((line.err as { stack: string }).stack).toContain('Error: relation');
    }
    await order();
    await receiver.until((all) => all.length === 2);
    await deliveredCount(atrium.services, 2);
  });
});
