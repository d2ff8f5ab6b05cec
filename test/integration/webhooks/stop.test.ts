import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebhookWorker } from '../../../src/webhooks/index.js';
import type { WebhookWorker } from '../../../src/webhooks/worker.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, attemptsOf, createEndpoint, deliveriesOf, Receiver, verifyWithStripe } from './support.js';

/**
 * A worker asked to stop (SIGTERM, `close()`) while an attempt is in flight: the attempt finishes
 * and is recorded before `stop()` resolves, because the store closes right after it.
 */
const ANSWER_AFTER_MS = 600;

let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;
let worker: WebhookWorker;

beforeAll(async () => {
  // The worker is started here, not by the role, so the test holds it and can stop it alone.
  atrium = await startTestAtrium({ WEBHOOK_TIMEOUT_MS: '5000' }, ['api', 'auth']);
  receiver = await new Receiver().start();
  catalogue = await makeCatalogue(atrium);
  worker = await startWebhookWorker(atrium.services);
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

describe('stopping the worker', () => {
  it('lets an attempt in flight finish and records it before stop() resolves', async () => {
    receiver.responder = () => ({ status: 200, delayMs: ANSWER_AFTER_MS });
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, { url: receiver.url('/slow') });
    const order = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    expect(order.status).toBe(201);
    await receiver.until((all) => all.some((r) => r.path === '/slow'));
    expect(receiver.at('/slow')[0]!.answeredAt).toBeUndefined();

    await worker.stop();
    const stoppedAt = performance.now();

    // The receiver had answered before stop() resolved, and its answer is already in the store.
    const answeredAt = receiver.at('/slow')[0]!.answeredAt;
    expect(answeredAt).toBeDefined();
    expect(answeredAt!).toBeLessThanOrEqual(stoppedAt);
    expect(await deliveriesOf(atrium, endpoint.id, who.headers)).toMatchObject([
      { status: 'delivered', attempt_count: 1, last_status_code: 200 },
    ]);
    expect(await attemptsOf(atrium, endpoint.id, who.headers)).toMatchObject([
      { attempt: 1, status_code: 200 },
    ]);
    const arrived = receiver.at('/slow');
    expect(arrived).toHaveLength(1);
    // What arrived while the worker was stopping is a whole, signed delivery, as Stripe checks one.
    expect(verifyWithStripe(arrived[0]!, endpoint.secret).type).toBe('order.created');
  });
});
