import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call } from '../../helpers/rest-client.js';
import { makeCatalogue, orderBody } from './fixtures.js';

/**
 * The order-items list paged as an HTTP client sees it over a real socket (orders-changes.test.ts
 * checks the same rules in-process): every item once, in order, by following next_cursor, and a
 * bad limit refused with the validation error body.
 */
describe('GET /api/v2/orders/{id}/items over HTTP', () => {
  let atrium: TestAtrium;
  let base: string;
  let headers: Record<string, string>;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['api']);
    base = (await atrium.listen()).httpUrl!;
    headers = (await atrium.caller()).headers;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('pages 30 items by next_cursor, 20 then 10, and refuses limit=0', async () => {
    const cat = await makeCatalogue(atrium);
    const items = Array.from({ length: 30 }, (_, i) => ({ product_id: cat.widget, quantity: i + 1 }));
    const created = await call(base, 'POST', '/api/v2/orders', { headers, json: orderBody(cat, { items }) });
    expect(created.status).toBe(201);
    const order = created.body as { id: string; items: unknown[] };

    const first = await call(base, 'GET', `/api/v2/orders/${order.id}/items`, { headers });
    expect(first.status).toBe(200);
    const page1 = first.body as {
      data: unknown[];
      pagination: { has_more: boolean; next_cursor: string; limit: number };
    };
    expect(page1.data).toHaveLength(20);
    expect(page1.pagination).toMatchObject({ has_more: true, limit: 20 });

    const next = encodeURIComponent(page1.pagination.next_cursor);
    const second = await call(base, 'GET', `/api/v2/orders/${order.id}/items?cursor=${next}`, { headers });
    expect(second.status).toBe(200);
    expect(second.body).toEqual({
      data: order.items.slice(20),
      pagination: { has_more: false, next_cursor: null, limit: 20 },
    });
    expect([...page1.data, ...(second.body as { data: unknown[] }).data]).toEqual(order.items);

    const bad = await call(base, 'GET', `/api/v2/orders/${order.id}/items?limit=0`, { headers });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'validation_error' });
  });
});
