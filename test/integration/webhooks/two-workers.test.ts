import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Services } from '../../../src/compose.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { testDialect, type TestDatabase } from '../../helpers/database.js';
import { ADDRESS } from '../orders/fixtures.js';
import { serve, type Served } from '../../helpers/serve.js';
import { closeWorkerBed, type Receiver, verifyWithStripe, workerBed } from './support.js';

/**
 * Two `atrium serve --role worker` processes share one PostgreSQL queue (FOR UPDATE SKIP LOCKED):
 * every attempt is made exactly once. A PostgreSQL rule: on SQLite the worker runs inside the one
 * serving process, so there is no second worker to race.
 */
const onPostgres = testDialect() === 'postgres';
if (!onPostgres) {
  console.error(
    'two-workers.test.ts skipped: several worker processes share a queue only on PostgreSQL (set TEST_DATABASE_URL)',
  );
}
const ENV = { WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
const EVENTS_PER_USER = 40;

let database: TestDatabase;
let services: Services;
let receiver: Receiver;
const workers: Served[] = [];

describe.skipIf(!onPostgres)('two worker processes on PostgreSQL', () => {
  beforeAll(async () => {
    ({ database, services, receiver } = await workerBed(ENV));
  });

  afterAll(async () => {
    for (const w of workers) await w.stop().catch(() => undefined);
    await closeWorkerBed({ database, services, receiver });
  });

  it('never make the same attempt twice, and deliver every event once', async () => {
    const product = await services.core.products.create({ name: 'Widget', priceCents: 1000 });
    const secrets = new Map<string, string>();
    const users = [];
    for (const n of [1, 2, 3]) {
      const user = await services.core.users.create({ handle: `racer${n}`, email: `racer${n}@example.com` });
      const path = `/w${n}`;
      const ep = await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, {
        url: receiver.url(path),
        userId: user.id,
      });
      secrets.set(path, ep.secret);
      users.push(user);
    }
    // The first attempt of every event fails, so each delivery is claimed twice: once per attempt.
    receiver.responder = (_r, nth) => ({ status: nth === 1 ? 500 : 200 });
    workers.push(await serve({ DATABASE_URL: database.url, ...ENV }, { roles: 'worker' }));
    workers.push(await serve({ DATABASE_URL: database.url, ...ENV }, { roles: 'worker' }));

    await Promise.all(
      users.map(async (user) => {
        for (let i = 0; i < EVENTS_PER_USER; i++) {
          await services.core.orders.create(
            { id: user.id, kind: 'user', role: 'member' },
            {
              items: [{ productId: product.id, quantity: 1 }],
              currency: 'USD',
              shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
            },
          );
        }
      }),
    );
    const total = users.length * EVENTS_PER_USER;
    await receiver.until((all) => all.length >= total * 2, 60_000);
    await new Promise((r) => setTimeout(r, 1_500));

    const seen = receiver.received.map((r) => `${r.path} ${r.eventId} ${r.attempt}`);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toHaveLength(total * 2);
    for (const r of receiver.received) verifyWithStripe(r, secrets.get(r.path)!);

    const rows = await services.store.db
      .selectFrom('delivery_attempts')
      .select(['delivery_id', 'round', 'attempt'])
      .execute();
    expect(rows).toHaveLength(total * 2);
    expect(new Set(rows.map((r) => `${r.delivery_id} ${r.round} ${r.attempt}`)).size).toBe(rows.length);
    const states = await services.store.db
      .selectFrom('webhook_deliveries')
      .select(['status', 'attempt_count'])
      .execute();
    expect(states).toHaveLength(total);
    expect(states.every((s) => s.status === 'delivered' && s.attempt_count === 2)).toBe(true);
  }, 120_000);
});
