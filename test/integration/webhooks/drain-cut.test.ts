import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Services } from '../../../src/compose.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import type { TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import { ADDRESS } from '../orders/fixtures.js';
import { closeWorkerBed, type Receiver, workerBed } from './support.js';

/**
 * SIGTERM to a real `atrium serve --role worker` whose WEBHOOK_TIMEOUT_MS (60 s, inside the
 * documented 1-300000) outlasts the 30 s drain limit, during an attempt to a receiver that never
 * answers. docs/webhooks.md, Shutdown: the attempt is cut before the limit and recorded as timed
 * out (to be retried), and the process exits 0. Its `webhook attempt` line says so: `retry`, and
 * `nextAttemptAt` the very time the store schedules the next attempt for.
 *
 * Before the fix the drain waited for the attempt's own timeout: the 30 s limit ended the process
 * with 1 ("drain took too long; exiting") and the attempt's outcome was never written.
 */
const ENV = { WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_BACKOFF_BASE_MS: '300' };

let database: TestDatabase;
let services: Services;
let receiver: Receiver;
let served: Served | undefined;

beforeAll(async () => {
  ({ database, services, receiver } = await workerBed(ENV));
});

afterAll(async () => {
  if (served && served.child.exitCode === null && served.child.signalCode === null) await served.kill9();
  await closeWorkerBed({ database, services, receiver });
});

describe('SIGTERM during an attempt longer than the drain limit allows', () => {
  it('cuts the attempt, records it as a timeout to retry, and exits 0', { timeout: 90_000 }, async () => {
    receiver.responder = () => ({ status: 200, delayMs: Infinity });
    const user = await services.core.users.create({ handle: 'hanging', email: 'hanging@example.com' });
    const endpoint = await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, {
      url: receiver.url('/hang'),
      userId: user.id,
    });
    const product = await services.core.products.create({ name: 'Widget', priceCents: 1000 });

    served = await serve({ DATABASE_URL: database.url, ...ENV }, { roles: 'worker' });
    const s = served;
    await services.core.orders.create(
      { id: user.id, kind: 'user', role: 'member' },
      {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'EUR',
        shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
      },
    );
    await receiver.until(() => receiver.at('/hang').length >= 1, 30_000);

    const exited = new Promise<number | null>((resolve) => s.child.once('exit', (code) => resolve(code)));
    s.child.kill('SIGTERM');
    expect(await exited, s.stderr()).toBe(0);
    expect(s.stderr()).toContain('"msg":"stopped"');
    expect(s.stderr()).not.toContain('drain took too long');
    expect(receiver.at('/hang')).toHaveLength(1);

    const delivery = await services.store.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', endpoint.id)
      .executeTakeFirstOrThrow();
    // Written before the store closed: the next attempt is scheduled, not left to a lease running out.
    expect(delivery).toMatchObject({ status: 'pending', attempt_count: 1, locked_until: null });
    const attempts = await services.store.db
      .selectFrom('delivery_attempts')
      .selectAll()
      .where('delivery_id', '=', delivery.id)
      .execute();
    expect(attempts.map((a) => [a.attempt, a.status_code])).toEqual([[1, null]]);
    expect(attempts[0]!.error).toMatch(/^timeout: the worker stopped/);

    const lines = s
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"msg":"webhook attempt"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      deliveryId: delivery.id,
      attempt: 1,
      error: 'timeout',
      result: 'retry',
    });
    expect(lines[0]!.nextAttemptAt).toEqual(expect.any(String));
    expect(Date.parse(lines[0]!.nextAttemptAt as string)).toBe(Date.parse(delivery.next_attempt_at!));
  });
});
