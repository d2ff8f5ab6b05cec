import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebhookWorker } from '../../../src/webhooks/index.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, attemptsOf, createEndpoint, deliveriesWhen, Receiver } from './support.js';

/**
 * A claimed delivery may wait for a slot before its attempt starts (the worker claims one batch
 * ahead of its slots), so its lease must cover that wait as well as the attempt. Until 2026-11-29 the
 * lease was one attempt's timeout and 5 s from the claim: an endpoint answering near the timeout
 * made the delivery waiting behind another outlive its lease while still in flight, and the same
 * worker (or another one on PostgreSQL) claimed it again and sent it twice.
 */
const TIMEOUT_MS = 8_000;
const ANSWER_AFTER_MS = 7_000;

let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium({ WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) }, ['api', 'auth']);
  receiver = await new Receiver().start();
  catalogue = await makeCatalogue(atrium);
  // One slot: the second delivery waits in the worker for the whole of the first attempt.
  await startWebhookWorker(atrium.services, { concurrency: 1 });
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

describe('the lease of a claimed delivery', () => {
  it('outlasts the wait for a slot and the attempt: a slow endpoint gets each event once', async () => {
    receiver.responder = () => ({ status: 200, delayMs: ANSWER_AFTER_MS });
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, { url: receiver.url('/near-timeout') });
    for (let i = 0; i < 2; i += 1) {
      const res = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
      expect(res.status).toBe(201);
    }
    const both = await deliveriesWhen(
      atrium,
      endpoint.id,
      who.headers,
      (ds) => ds.length === 2 && ds.every((d) => d.status === 'delivered'),
      'both delivered',
      3 * TIMEOUT_MS,
    );
    expect(both.map((d) => d.attempt_count)).toEqual([1, 1]);
    // Long enough for a re-claim after the second lease to have been sent and answered.
    await new Promise((r) => setTimeout(r, 1_000));
    const arrived = receiver.at('/near-timeout');
    expect(arrived.map((r) => r.eventId).sort()).toEqual([...new Set(arrived.map((r) => r.eventId))].sort());
    expect(arrived).toHaveLength(2);
    expect(await attemptsOf(atrium, endpoint.id, who.headers)).toHaveLength(2);
  }, 60_000);
});
