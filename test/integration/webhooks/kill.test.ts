import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Services } from '../../../src/compose.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import type { TestDatabase } from '../../helpers/database.js';
import { ADDRESS } from '../orders/fixtures.js';
import { serve, type Served } from '../../helpers/serve.js';
import { closeWorkerBed, type Receiver, verifyWithStripe, workerBed } from './support.js';

/**
 * kill -9 of a real `atrium serve` in the middle of a schedule, with one attempt in flight, then a
 * restart: no event lost, the sequence continues where it was, nothing delivered is sent again.
 * The restarted worker's `webhook attempt` line for the interrupted attempt says it is retried, and
 * when: at once, by the claim that found it (the time recorded for the next attempt). Until
 * 2026-11-29 it said `retry` with `nextAttemptAt: null`.
 */
const ENV = { WEBHOOK_BACKOFF_BASE_MS: '300', WEBHOOK_TIMEOUT_MS: '1000' };

let database: TestDatabase;
let services: Services;
let receiver: Receiver;
let first: Served | undefined;
let second: Served | undefined;

beforeAll(async () => {
  ({ database, services, receiver } = await workerBed(ENV));
});

afterAll(async () => {
  await first?.kill9().catch(() => undefined);
  await second?.stop().catch(() => undefined);
  await closeWorkerBed({ database, services, receiver });
});

async function userWithEndpoint(handle: string, path: string) {
  const user = await services.core.users.create({ handle, email: `${handle}@example.com`, role: 'member' });
  const key = await services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
  const endpoint = await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, {
    url: receiver.url(path),
    userId: user.id,
  });
  return { user, headers: { 'x-api-key': key.key, 'content-type': 'application/json' }, endpoint };
}

describe('kill -9 during a schedule', () => {
  it('continues the sequence after restart, loses nothing, re-sends nothing delivered', async () => {
    const product = await services.core.products.create({ name: 'Widget', priceCents: 1000 });
    const body = JSON.stringify({
      items: [{ product_id: product.id, quantity: 1 }],
      currency: 'USD',
      shipping_address: ADDRESS,
    });
    const a = await userWithEndpoint('killer_a', '/a');
    const b = await userWithEndpoint('killer_b', '/b');
    // /a: two failures, then the third attempt hangs (the kill lands while it is in flight), then
    // a failure and a success. /b answers 200 at once.
    receiver.responder = (r, nth) => {
      if (r.path !== '/a') return { status: 200 };
      return [
        { status: 500 },
        { status: 500 },
        { status: 200, delayMs: Infinity },
        { status: 503 },
        { status: 200 },
      ][nth - 1]!;
    };

    first = await serve({ DATABASE_URL: database.url, ...ENV });
    for (const who of [a, b]) {
      const res = await fetch(`${first.url}/api/v2/orders`, { method: 'POST', headers: who.headers, body });
      expect(res.status).toBe(201);
    }
    await receiver.until(() => receiver.at('/a').length >= 3 && receiver.at('/b').length >= 1, 15_000);
    await first.kill9();
    first = undefined;

    // While nothing serves, a change still writes its event to the outbox.
    await services.core.orders.create(
      { id: b.user.id, kind: 'user', role: 'member' },
      {
        items: [{ productId: product.id, quantity: 2 }],
        currency: 'EUR',
        shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
      },
    );

    second = await serve({ DATABASE_URL: database.url, ...ENV });
    await receiver.until(() => receiver.at('/a').length >= 5 && receiver.at('/b').length >= 2, 30_000);
    // Long enough for any wrong extra attempt (a restarted sequence, a repeated delivery) to show.
    await new Promise((r) => setTimeout(r, 2_500));

    const atA = receiver.at('/a');
    expect(atA.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(atA.map((r) => r.eventId)).size).toBe(1);
    for (const r of atA) verifyWithStripe(r, a.endpoint.secret);
    const atB = receiver.at('/b');
    expect(atB).toHaveLength(2);
    expect(new Set(atB.map((r) => r.eventId)).size).toBe(2);
    expect(atB.map((r) => r.attempt)).toEqual([1, 1]);

    const delivery = await services.store.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', a.endpoint.id)
      .executeTakeFirstOrThrow();
    expect(delivery).toMatchObject({
      status: 'delivered',
      attempt_count: 5,
      last_status_code: 200,
      locked_until: null,
    });
    const attempts = await services.store.db
      .selectFrom('delivery_attempts')
      .selectAll()
      .where('delivery_id', '=', delivery.id)
      .orderBy('attempt')
      .execute();
    expect(attempts.map((x) => [x.attempt, x.status_code])).toEqual([
      [1, 500],
      [2, 500],
      [3, null],
      [4, 503],
      [5, 200],
    ]);
    expect(attempts[2]!.error).toMatch(/^interrupted/);
    const interrupted = second
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"msg":"webhook attempt"') && l.includes('"error":"interrupted"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(interrupted).toHaveLength(1);
    expect(interrupted[0]).toMatchObject({ deliveryId: delivery.id, attempt: 3, result: 'retry' });
    expect(interrupted[0]!.nextAttemptAt).toEqual(expect.any(String));
    expect(Date.parse(interrupted[0]!.nextAttemptAt as string)).toBe(Date.parse(attempts[3]!.created_at));
    const pending = await services.store.db
      .selectFrom('events')
      .select('id')
      .where('dispatched_at', 'is', null)
      .execute();
    expect(pending).toEqual([]);
    expect(await second.stop()).toBe(0);
    second = undefined;
  }, 90_000);
});
