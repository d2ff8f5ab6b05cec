import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { ensureBuilt } from '../../helpers/build.js';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { runServe, shape } from '../../helpers/serve-signal.js';
import { ADDRESS } from '../orders/fixtures.js';
import { Receiver } from './support.js';

/**
 * docs/webhooks.md, "Shutdown": SIGTERM stops claiming, lets attempts in flight finish and records
 * them. A SIGTERM during the start ended the process with the worker already claiming (it started
 * before the listeners), so deliveries were left claimed with no attempt recorded, and later cost an
 * attempt recorded as interrupted. The built `atrium serve` with due deliveries waiting for a slow
 * receiver, sent SIGTERM at each line of its start and at spread moments of it: after every exit,
 * each delivery's attempt count is the number of attempts recorded for it.
 */
describe('a SIGTERM while serve starts, with deliveries due', { timeout: 600_000 }, () => {
  let database: TestDatabase;
  let services: Services;
  let receiver: Receiver;
  let userId: string;
  let productId: string;

  beforeAll(async () => {
    ensureBuilt();
    database = await sharedDatabase();
    services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }), {
      migrate: true,
    });
    receiver = await new Receiver().start();
    // Slow enough that attempts are in flight whenever the signal lands.
    receiver.responder = () => ({ status: 200, delayMs: 300 });
    const user = await services.core.users.create({
      handle: 'starter',
      email: 'starter@example.com',
      role: 'member',
    });
    userId = user.id;
    await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, { url: receiver.url('/hook'), userId });
    productId = (await services.core.products.create({ name: 'Widget', priceCents: 1000 })).id;
  });

  afterAll(async () => {
    if (services) await closeServices(services);
    await receiver?.stop();
    await database?.drop();
  });

  /** Events waiting in the outbox: each becomes a due delivery when a worker fans it out. */
  async function queueEvents(n: number) {
    for (let i = 0; i < n; i++) {
      await services.core.orders.create(
        { id: userId, kind: 'user', role: 'member' },
        {
          items: [{ productId, quantity: 1 }],
          currency: 'USD',
          shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
        },
      );
    }
  }

  /** Deliveries whose attempt count is not the attempts recorded for them (claimed, never sent). */
  async function unrecorded(): Promise<unknown[]> {
    const { rows } = await sql<{ id: string; attempt_count: number; recorded: number }>`
      SELECT d.id, d.attempt_count, (SELECT COUNT(*) FROM delivery_attempts a
        WHERE a.delivery_id = d.id AND a.round = d.round) AS recorded
      FROM webhook_deliveries d`.execute(services.store.db);
    return rows.filter((r) => Number(r.attempt_count) !== Number(r.recorded));
  }

  it('leaves no delivery claimed without an attempt recorded', async () => {
    const env = {
      DATABASE_URL: database.url,
      WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    await queueEvents(20);
    const measured = await runServe(env, undefined);
    expect(measured.code, measured.stderr).toBe(0);
    const upToStarted = measured.lines.slice(
      0,
      measured.lines.findIndex((l) => l.msg === 'atrium started') + 1,
    );
    const moments: Array<{ line: string } | { afterMs: number }> = [
      ...[...new Set(upToStarted.map((l) => shape(l.msg)))].map((line) => ({ line })),
      ...Array.from({ length: 8 }, (_, i) => ({
        afterMs: Math.round((measured.startedAfterMs! * (i + 2)) / 8),
      })),
    ];
    const failures: string[] = [];
    for (const moment of moments) {
      await queueEvents(20);
      const run = await runServe(env, moment);
      const left = await unrecorded();
      if (run.code !== 0 || left.length > 0)
        failures.push(
          `${JSON.stringify(moment)}: exit ${run.code}, ${left.length} claimed without an attempt`,
        );
    }
    expect(failures).toEqual([]);
  });
});
