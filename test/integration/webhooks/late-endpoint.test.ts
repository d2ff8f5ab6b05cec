import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Outbox } from '../../../src/webhooks/outbox.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { sharedDatabase } from '../../helpers/database.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint, Receiver, verifyWithStripe } from './support.js';

/**
 * An event goes to the endpoints that existed when it happened. Events wait in the outbox while no
 * worker runs (here: a process without the worker role; in production, a worker outage), and until
 * 2026-11-28 an endpoint registered meanwhile received events from before it existed.
 */
let atrium: TestAtrium;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium({}, ['api', 'auth']);
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
});

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('fan-out of events that waited in the outbox', () => {
  it('delivers an event to the endpoints registered before it, not to one registered while it waited', async () => {
    const who = await atrium.caller();
    const before = await createEndpoint(atrium, who.headers, { url: 'http://127.0.0.1:9/before' });
    await tick();
    const first = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    expect(first.status).toBe(201);
    await tick();
    const after = await createEndpoint(atrium, who.headers, { url: 'http://127.0.0.1:9/after' });
    await tick();
    const second = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    expect(second.status).toBe(201);

    // The worker's step, once it runs again.
    expect(await new Outbox(atrium.services.store).fanOut(new Date())).toBeGreaterThanOrEqual(2);

    const deliveries = await atrium.services.store.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select(['d.endpoint_id', 'e.data'])
      .where('e.owner_id', '=', who.userId)
      .where('e.type', '=', 'order.created')
      .execute();
    const to = (order: unknown) =>
      deliveries
        .filter((d) => (JSON.parse(d.data) as { id: string }).id === (order as { id: string }).id)
        .map((d) => d.endpoint_id)
        .sort();
    expect(to(first.body)).toEqual([before.id]);
    expect(to(second.body)).toEqual([before.id, after.id].sort());
  });
});

describe('the same through a worker and a real receiver', () => {
  it('a worker started after the events delivers each to the endpoints that existed when it happened', async () => {
    const database = await sharedDatabase();
    const receiver = await new Receiver().start();
    const env = { DATABASE_URL: database.url, WEBHOOK_BACKOFF_BASE_MS: '50' };
    let worker: TestAtrium | undefined;
    try {
      // No worker yet: the events wait in the outbox, as through a worker outage.
      const front = await startTestAtrium(env, ['api', 'auth']);
      const shop = await makeCatalogue(front);
      const who = await front.caller();
      const before = await createEndpoint(front, who.headers, { url: receiver.url('/before') });
      await tick();
      const first = await api(front, 'POST', '/api/v2/orders', who.headers, orderBody(shop));
      await tick();
      const after = await createEndpoint(front, who.headers, { url: receiver.url('/after') });
      await tick();
      const second = await api(front, 'POST', '/api/v2/orders', who.headers, orderBody(shop));
      await front.stop();
      expect([first.status, second.status]).toEqual([201, 201]);

      worker = await startTestAtrium(env, ['worker']);
      await receiver.until(() => receiver.at('/before').length >= 2 && receiver.at('/after').length >= 1);
      // Long enough for a wrong delivery of the first order to /after to show.
      await new Promise((r) => setTimeout(r, 1_500));
      const orderOf = (r: { raw: string }) => (JSON.parse(r.raw) as { data: { id: string } }).data.id;
      const ids = (body: unknown) => (body as { id: string }).id;
      expect(receiver.at('/before').map(orderOf).sort()).toEqual([ids(first.body), ids(second.body)].sort());
      expect(receiver.at('/after').map(orderOf)).toEqual([ids(second.body)]);
      for (const r of receiver.at('/before')) verifyWithStripe(r, before.secret);
      for (const r of receiver.at('/after')) verifyWithStripe(r, after.secret);
    } finally {
      await worker?.stop();
      await receiver.stop();
      await database.drop();
    }
  });
});
