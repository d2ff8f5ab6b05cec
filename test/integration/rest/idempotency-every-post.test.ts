import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call, type RestAnswer } from '../../helpers/rest-client.js';
import { advanceTo, type Catalogue, makeCatalogue, orderBody } from '../orders/fixtures.js';

/**
 * Idempotency-Key on every REST POST that changes something, not only order creation, as a client
 * (Stripe's SDKs send a key on every POST) sees it over a real socket: a retry with the same key
 * replays the first answer and has no second effect; another body, or another path, with the same
 * key is 422; concurrent retries have one effect.
 */
let atrium: TestAtrium;
let base: string;
let cat: Catalogue;
let owner: Record<string, string>;
let admin: Record<string, string>;
let n = 0;
const freshKey = () => `every-post-${Date.now()}-${++n}`;

beforeAll(async () => {
  atrium = await startTestAtrium({}, ['api']);
  base = (await atrium.listen()).httpUrl!;
  cat = await makeCatalogue(atrium);
  owner = (await atrium.caller()).headers;
  admin = (await atrium.caller({ role: 'admin' })).headers;
});
afterAll(async () => {
  await atrium?.stop();
});

const post = (path: string, key: string, json?: unknown, headers = owner): Promise<RestAnswer> =>
  call(base, 'POST', path, {
    headers: { ...headers, 'idempotency-key': key },
    ...(json === undefined ? {} : { json }),
  });

async function newOrder(): Promise<string> {
  const res = await call(base, 'POST', '/api/v2/orders', { headers: owner, json: orderBody(cat) });
  expect(res.status).toBe(201);
  return (res.body as { id: string }).id;
}

const itemCount = async (orderId: string) =>
  (
    await atrium.services.store.db
      .selectFrom('order_items')
      .select('id')
      .where('order_id', '=', orderId)
      .execute()
  ).length;

const eventCount = async (type: string, orderId: string) =>
  (
    await atrium.services.store.db
      .selectFrom('events')
      .select('id')
      .where('type', '=', type)
      .where('data', 'like', `%"id":"${orderId}"%`)
      .execute()
  ).length;

const endpointCount = async () =>
  (await atrium.services.store.db.selectFrom('webhook_endpoints').select('id').execute()).length;

/** Every answer is the success (first or replayed) or 409 idempotency_in_progress; never 500. */
function expectOneEffectAnswers(answers: RestAnswer[], success: number): void {
  for (const a of answers) {
    if (a.status === success) continue;
    expect(a.status).toBe(409);
    expect(a.body).toMatchObject({ error: 'idempotency_in_progress' });
  }
  expect(answers.some((a) => a.status === success)).toBe(true);
}

describe('POST /orders/{id}/items with Idempotency-Key', () => {
  it('replays the first answer with Idempotent-Replayed: true and adds the item once', async () => {
    const orderId = await newOrder();
    const path = `/api/v2/orders/${orderId}/items`;
    const key = freshKey();
    const item = { product_id: cat.gadget, quantity: 3 };
    const first = await post(path, key, item);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post(path, key, item);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(await itemCount(orderId)).toBe(3);
  });

  it('is 422 idempotency_key_reused for another body, and adds nothing', async () => {
    const orderId = await newOrder();
    const path = `/api/v2/orders/${orderId}/items`;
    const key = freshKey();
    expect((await post(path, key, { product_id: cat.gadget, quantity: 1 })).status).toBe(201);
    const other = await post(path, key, { product_id: cat.gadget, quantity: 2 });
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ error: 'idempotency_key_reused' });
    expect(await itemCount(orderId)).toBe(3);
  });

  it('is 422 for a key first used on another path (another order, or order creation)', async () => {
    const [a, b] = [await newOrder(), await newOrder()];
    const key = freshKey();
    const item = { product_id: cat.gadget, quantity: 1 };
    expect((await post(`/api/v2/orders/${a}/items`, key, item)).status).toBe(201);
    const elsewhere = await post(`/api/v2/orders/${b}/items`, key, item);
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body).toMatchObject({ error: 'idempotency_key_reused' });
    expect(await itemCount(b)).toBe(2);

    const createKey = freshKey();
    expect((await post('/api/v2/orders', createKey, orderBody(cat))).status).toBe(201);
    const onItems = await post(`/api/v2/orders/${a}/items`, createKey, item);
    expect(onItems.status).toBe(422);
    expect(onItems.body).toMatchObject({ error: 'idempotency_key_reused' });
    expect(await itemCount(a)).toBe(3);
  });

  it('adds exactly one item for 8 concurrent requests with one key', async () => {
    const orderId = await newOrder();
    const path = `/api/v2/orders/${orderId}/items`;
    const key = freshKey();
    const item = { product_id: cat.widget, quantity: 1 };
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(path, key, item)));
    expectOneEffectAnswers(answers, 201);
    expect(await itemCount(orderId)).toBe(3);
  });

  it('holds on the deprecated /api/v1 route too, and a failed request releases the key', async () => {
    const orderId = await newOrder();
    const path = `/api/v1/orders/${orderId}/items`;
    const key = freshKey();
    const unknown = await post(path, key, { product_id: 'prd_missing', quantity: 1 });
    expect(unknown.status).toBe(422);
    expect(unknown.body).toMatchObject({ error: 'validation_error' });
    const item = { product_id: cat.gadget, quantity: 1 };
    const first = await post(path, key, item);
    expect(first.status).toBe(201);
    const again = await post(path, key, item);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await itemCount(orderId)).toBe(3);
  });
});

describe('POST /orders/{id}/cancel and /refund with Idempotency-Key', () => {
  it('replays the 204 of a cancel instead of answering 409 conflict, with one cancel event', async () => {
    const orderId = await newOrder();
    const key = freshKey();
    const first = await post(`/api/v2/orders/${orderId}/cancel`, key);
    expect(first.status).toBe(204);
    const again = await post(`/api/v2/orders/${orderId}/cancel`, key);
    expect(again.status).toBe(204);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe('');
    expect(await eventCount('order.cancelled', orderId)).toBe(1);
  });

  it('is 422 for a cancel key reused on another order or on a refund', async () => {
    const [a, b] = [await newOrder(), await newOrder()];
    const key = freshKey();
    expect((await post(`/api/v2/orders/${a}/cancel`, key)).status).toBe(204);
    const other = await post(`/api/v2/orders/${b}/cancel`, key);
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ error: 'idempotency_key_reused' });
    const order = await call(base, 'GET', `/api/v2/orders/${b}`, { headers: owner });
    expect(order.body).toMatchObject({ status: 'PENDING' });
    const refund = await post(`/api/v2/orders/${a}/refund`, key);
    expect(refund.status).toBe(422);
    expect(refund.body).toMatchObject({ error: 'idempotency_key_reused' });
  });

  it('refunds once for 8 concurrent refunds with one key; a replay is 204, not 409', async () => {
    const orderId = await newOrder();
    await advanceTo(atrium, admin, orderId, 'SHIPPED');
    const key = freshKey();
    const path = `/api/v2/orders/${orderId}/refund`;
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(path, key)));
    expectOneEffectAnswers(answers, 204);
    const replay = await post(path, key);
    expect(replay.status).toBe(204);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const refunds = await atrium.services.store.db
      .selectFrom('refunds')
      .select('id')
      .where('order_id', '=', orderId)
      .execute();
    expect(refunds).toHaveLength(1);
    expect(await eventCount('order.refunded', orderId)).toBe(1);
  });
});

describe('webhook endpoints with Idempotency-Key', () => {
  const BASE = '/api/v2/webhook_endpoints';
  const body = (path: string) => ({ url: `http://127.0.0.1:9/${path}`, events: ['order.created'] });

  it('replays the created endpoint (same id and secret) and registers it once', async () => {
    const key = freshKey();
    const before = await endpointCount();
    const first = await post(BASE, key, body('once'));
    expect(first.status).toBe(201);
    const again = await post(BASE, key, body('once'));
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(await endpointCount()).toBe(before + 1);
  });

  it('is 422 for another body, and for the key reused on another path (rotate_secret)', async () => {
    const key = freshKey();
    const first = await post(BASE, key, body('first'));
    expect(first.status).toBe(201);
    const before = await endpointCount();
    const other = await post(BASE, key, body('second'));
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ error: 'idempotency_key_reused' });
    const id = (first.body as { id: string }).id;
    const rotate = await post(`${BASE}/${id}/rotate_secret`, key);
    expect(rotate.status).toBe(422);
    expect(rotate.body).toMatchObject({ error: 'idempotency_key_reused' });
    expect(await endpointCount()).toBe(before);
    const read = await call(base, 'GET', `${BASE}/${id}`, { headers: owner });
    expect(read.body).toMatchObject({ url: body('first').url });
  });

  it('registers exactly one endpoint for 8 concurrent requests with one key', async () => {
    const key = freshKey();
    const before = await endpointCount();
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(BASE, key, body('race'))));
    expectOneEffectAnswers(answers, 201);
    const ids = new Set(answers.filter((a) => a.status === 201).map((a) => (a.body as { id: string }).id));
    expect(ids.size).toBe(1);
    expect(await endpointCount()).toBe(before + 1);
  });

  it('rotates a secret once per key: the replay shows the same new secret', async () => {
    const created = await post(BASE, freshKey(), body('rotate'));
    const id = (created.body as { id: string }).id;
    const key = freshKey();
    const first = await post(`${BASE}/${id}/rotate_secret`, key);
    expect(first.status).toBe(200);
    const again = await post(`${BASE}/${id}/rotate_secret`, key);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const row = await atrium.services.store.db
      .selectFrom('webhook_endpoints')
      .select(['secret', 'previous_secret'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(row.secret).toBe((first.body as { secret: string }).secret);
    expect(row.previous_secret).toBe((created.body as { secret: string }).secret);
  });
});

describe('the other POSTs with Idempotency-Key', () => {
  it('queues one test event for a repeated POST .../test, and replays its envelope', async () => {
    const created = await post('/api/v2/webhook_endpoints', freshKey(), { url: 'http://127.0.0.1:9/t' });
    const id = (created.body as { id: string }).id;
    const key = freshKey();
    const first = await post(`/api/v2/webhook_endpoints/${id}/test`, key, { type: 'order.created' });
    expect(first.status).toBe(202);
    const again = await post(`/api/v2/webhook_endpoints/${id}/test`, key, { type: 'order.created' });
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const queued = await atrium.services.store.db
      .selectFrom('events')
      .select('id')
      .where('target_endpoint_id', '=', id)
      .execute();
    expect(queued).toHaveLength(1);
  });

  it('replays users verify and the data export', async () => {
    const who = await atrium.caller();
    const key = freshKey();
    const path = `/api/v2/users/${who.userId}/verify`;
    expect((await post(path, key, undefined, who.headers)).status).toBe(204);
    const again = await post(path, key, undefined, who.headers);
    expect(again.status).toBe(204);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const exportKey = freshKey();
    const first = await post('/api/data/export', exportKey, undefined, admin);
    expect(first.status).toBe(202);
    const replay = await post('/api/data/export', exportKey, undefined, admin);
    expect(replay.status).toBe(202);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
  });
});

describe('the OpenAPI document', () => {
  it('lists Idempotency-Key, 409 and 422 on every POST operation it shows', async () => {
    const doc = (await call(base, 'GET', '/openapi.json')).body as {
      paths: Record<
        string,
        Record<string, { parameters?: { in: string; name: string }[]; responses: object }>
      >;
    };
    const posts = Object.entries(doc.paths).flatMap(([path, ops]) =>
      ops.post ? [{ path, op: ops.post }] : [],
    );
    expect(posts.length).toBeGreaterThan(10);
    for (const { path, op } of posts) {
      const names = (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name.toLowerCase());
      expect(names, path).toContain('idempotency-key');
      expect(Object.keys(op.responses), path).toEqual(expect.arrayContaining(['409', '422']));
    }
  });
});
