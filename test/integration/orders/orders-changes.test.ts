import { beforeAll, describe, expect, it } from 'vitest';
import {
  ADDRESS,
  advanceTo,
  createOrder,
  freshOrder,
  type Headers,
  orderBody,
  orderEvents,
  request,
  shopForSuite,
} from './fixtures.js';

describe('changing orders: PATCH, PUT, DELETE and line items', () => {
  const shop = shopForSuite();
  let stranger: Headers;

  const fresh = () => freshOrder(shop);
  const patch = (id: string, body: unknown, headers: Headers = shop.owner) =>
    request(shop.atrium, 'PATCH', `/api/v2/orders/${id}`, headers, body);
  const put = (id: string, body: unknown, headers: Headers = shop.owner) =>
    request(shop.atrium, 'PUT', `/api/v2/orders/${id}`, headers, body);
  const get = async (id: string) =>
    (await request(shop.atrium, 'GET', `/api/v2/orders/${id}`, shop.admin)).json();
  const eventsFor = (id: string) => orderEvents(shop.atrium, id);

  beforeAll(async () => {
    stranger = (await shop.atrium.caller()).headers;
  });

  describe('PATCH', () => {
    it('changes the address and currency of a PENDING order and records order.updated', async () => {
      const order = await fresh();
      const address = { ...ADDRESS, street: '1 New Road', country: 'IE' };
      const res = await patch(order.id, { shipping_address: address, currency: 'EUR' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ currency: 'EUR', shipping_address: address, amount_cents: 2899 });
      expect(res.json().updated_at >= (order.updated_at as string)).toBe(true);
      expect(await get(order.id)).toEqual(res.json());
      const events = await eventsFor(order.id);
      expect(events.map((e) => e.type)).toEqual(['order.created', 'order.updated']);
      // The event carries the REST body, with its timestamps as Unix seconds (webhook convention).
      const body = res.json();
      const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
      expect(events[1]!.data).toEqual({
        ...body,
        created_at: seconds(body.created_at),
        updated_at: seconds(body.updated_at),
      });
    });

    it('adds, changes and removes a coupon with the totals recomputed', async () => {
      const order = await fresh();
      expect((await patch(order.id, { coupon_code: 'tenoff' })).json()).toMatchObject({
        coupon_code: 'TENOFF',
        discount_cents: 290,
        amount_cents: 2609,
      });
      expect((await patch(order.id, { coupon_code: 'FIVEBUCKS' })).json()).toMatchObject({
        amount_cents: 2399,
      });
      expect((await patch(order.id, { coupon_code: null })).json()).toMatchObject({
        coupon_code: null,
        discount_cents: 0,
        amount_cents: 2899,
      });
    });

    it('422 for an unknown or deactivated coupon', async () => {
      const order = await fresh();
      for (const code of ['NOSUCH', 'OLD']) {
        const res = await patch(order.id, { coupon_code: code });
        expect(res.statusCode).toBe(422);
        expect(res.json().details[0]).toMatchObject({ field: 'coupon_code', code: 'unknown_coupon' });
      }
    });

    it('a patch that changes nothing ({} included) answers 200 and records no event', async () => {
      const order = await fresh();
      const res = await patch(order.id, { currency: 'USD', status: 'PENDING' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(order);
      expect((await eventsFor(order.id)).map((e) => e.type)).toEqual(['order.created']);
      const empty = await patch(order.id, {});
      expect(empty.statusCode).toBe(200);
      expect(empty.json()).toEqual(order);
      expect((await eventsFor(order.id)).map((e) => e.type)).toEqual(['order.created']);
    });

    it.each([
      ['an unknown field', { amount_cents: 1 }, 'amount_cents', 'unknown_field'],
      ['an unknown status', { status: 'LOST' }, 'status', 'invalid_enum'],
      ['a currency of the wrong type', { currency: 1 }, 'currency', 'invalid_type'],
      ['a partial address', { shipping_address: { city: 'Paris' } }, 'shipping_address.name', 'required'],
    ])('400 for %s', async (_name, body, field, code) => {
      const order = await fresh();
      const res = await patch(order.id, body);
      expect(res.statusCode).toBe(400);
      expect(res.json().details).toContainEqual(expect.objectContaining({ field, code }));
    });

    it('malformed JSON is 400', async () => {
      const order = await fresh();
      const res = await patch(order.id, '{"currency":');
      expect(res.statusCode).toBe(400);
      expect(res.json().details[0].code).toBe('invalid_json');
    });

    it('only an admin advances the status, one step at a time', async () => {
      const order = await fresh();
      const byOwner = await patch(order.id, { status: 'PROCESSING' });
      expect(byOwner.statusCode).toBe(403);
      expect(byOwner.json().error).toBe('forbidden');
      const skip = await patch(order.id, { status: 'SHIPPED' }, shop.admin);
      expect(skip.statusCode).toBe(409);
      expect(skip.json().error).toBe('conflict');
      for (const status of ['PROCESSING', 'SHIPPED', 'DELIVERED']) {
        const res = await patch(order.id, { status }, shop.admin);
        expect(res.statusCode).toBe(200);
        expect(res.json().status).toBe(status);
      }
      for (const status of ['SHIPPED', 'PENDING', 'CANCELLED']) {
        expect((await patch(order.id, { status }, shop.admin)).statusCode).toBe(409);
      }
      const types = (await eventsFor(order.id)).map((e) => e.type);
      expect(types).toEqual(['order.created', 'order.updated', 'order.updated', 'order.updated']);
    });

    it('status CANCELLED by the owner cancels, like the cancel action', async () => {
      const order = await fresh();
      const res = await patch(order.id, { status: 'CANCELLED' });
      expect(res.statusCode).toBe(200);
      expect(res.json().status).toBe('CANCELLED');
      expect((await eventsFor(order.id)).map((e) => e.type)).toEqual(['order.created', 'order.cancelled']);
      expect((await patch(order.id, { status: 'PROCESSING' }, shop.admin)).statusCode).toBe(409);
    });

    it('409 for editing an order that is no longer PENDING', async () => {
      const order = await fresh();
      await advanceTo(shop.atrium, shop.admin, order.id, 'PROCESSING');
      const res = await patch(order.id, { shipping_address: ADDRESS });
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toBe('conflict');
    });

    it("403 for another caller's order, 404 for a missing one; an admin may edit any", async () => {
      const order = await fresh();
      expect((await patch(order.id, { currency: 'GBP' }, stranger)).statusCode).toBe(403);
      expect((await patch('ord_missing', { currency: 'GBP' })).statusCode).toBe(404);
      expect((await patch('ord_%00', { currency: 'GBP' })).statusCode).toBe(404);
      expect((await patch(order.id, { currency: 'GBP' }, shop.admin)).json().currency).toBe('GBP');
    });
  });

  describe('PUT', () => {
    it('replaces items, currency, address and coupon; prices come from the catalogue again', async () => {
      const order = await fresh();
      const res = await put(order.id, {
        items: [{ product_id: shop.cat.gadget, quantity: 3 }],
        currency: 'GBP',
        shipping_address: { ...ADDRESS, city: 'Bath' },
        coupon_code: 'FIVEBUCKS',
      });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        id: order.id,
        currency: 'GBP',
        subtotal_cents: 1197,
        discount_cents: 500,
        amount_cents: 697,
        coupon_code: 'FIVEBUCKS',
        created_at: order.created_at,
        status: 'PENDING',
      });
      expect(body.items).toHaveLength(1);
      expect(body.items[0]).toMatchObject({
        product_id: shop.cat.gadget,
        quantity: 3,
        unit_price_cents: 399,
      });
      expect(await get(order.id)).toEqual(body);
    });

    it('an omitted coupon_code means none: PUT is a full replacement', async () => {
      const order = await createOrder(
        shop.atrium,
        shop.owner,
        orderBody(shop.cat, { coupon_code: 'TENOFF' }),
      );
      const res = await put(order.id, orderBody(shop.cat));
      expect(res.json()).toMatchObject({ coupon_code: null, discount_cents: 0 });
    });

    it('400 for a partial body, 422 for an unknown product, 409 once in fulfilment, 403 for others', async () => {
      const order = await fresh();
      const partial = await put(order.id, { currency: 'EUR' });
      expect(partial.statusCode).toBe(400);
      expect(partial.json().details).toContainEqual(
        expect.objectContaining({ field: 'items', code: 'required' }),
      );
      const unknown = await put(
        order.id,
        orderBody(shop.cat, { items: [{ product_id: 'prd_x', quantity: 1 }] }),
      );
      expect(unknown.statusCode).toBe(422);
      expect((await put(order.id, orderBody(shop.cat), stranger)).statusCode).toBe(403);
      await advanceTo(shop.atrium, shop.admin, order.id, 'SHIPPED');
      expect((await put(order.id, orderBody(shop.cat))).statusCode).toBe(409);
    });
  });

  describe('DELETE', () => {
    it('removes a PENDING order (announced as order.cancelled) and it is gone', async () => {
      const order = await fresh();
      const res = await request(shop.atrium, 'DELETE', `/api/v2/orders/${order.id}`, shop.owner);
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect((await request(shop.atrium, 'GET', `/api/v2/orders/${order.id}`, shop.owner)).statusCode).toBe(
        404,
      );
      const events = await eventsFor(order.id);
      expect(events.map((e) => e.type)).toEqual(['order.created', 'order.cancelled']);
      expect(events[1]!.data.status).toBe('CANCELLED');
      const items = await shop.atrium.services.store.db
        .selectFrom('order_items')
        .select('id')
        .where('order_id', '=', order.id)
        .execute();
      expect(items).toEqual([]);
      expect(
        (await request(shop.atrium, 'DELETE', `/api/v2/orders/${order.id}`, shop.owner)).statusCode,
      ).toBe(404);
    });

    it('removes a CANCELLED order without a second cancellation event', async () => {
      const order = await fresh();
      await request(shop.atrium, 'POST', `/api/v2/orders/${order.id}/cancel`, shop.owner);
      expect(
        (await request(shop.atrium, 'DELETE', `/api/v2/orders/${order.id}`, shop.owner)).statusCode,
      ).toBe(204);
      expect((await eventsFor(order.id)).map((e) => e.type)).toEqual(['order.created', 'order.cancelled']);
    });

    it('409 for an order in fulfilment, 403 for another caller', async () => {
      const order = await fresh();
      expect((await request(shop.atrium, 'DELETE', `/api/v2/orders/${order.id}`, stranger)).statusCode).toBe(
        403,
      );
      await advanceTo(shop.atrium, shop.admin, order.id, 'PROCESSING');
      const res = await request(shop.atrium, 'DELETE', `/api/v2/orders/${order.id}`, shop.owner);
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toBe('conflict');
    });
  });

  describe('line items', () => {
    const items = (id: string, headers: Headers = shop.owner) =>
      request(shop.atrium, 'GET', `/api/v2/orders/${id}/items`, headers);
    const addItem = (id: string, body: unknown, headers: Headers = shop.owner) =>
      request(shop.atrium, 'POST', `/api/v2/orders/${id}/items`, headers, body);
    const removeItem = (id: string, itemId: string, headers: Headers = shop.owner) =>
      request(shop.atrium, 'DELETE', `/api/v2/orders/${id}/items/${itemId}`, headers);

    it('lists the items and reads one', async () => {
      const order = await fresh();
      const res = await items(order.id);
      expect(res.statusCode).toBe(200);
      expect(res.json().data).toEqual(order.items);
      // The list envelope, as every list has it, with the default page size of every list.
      expect(res.json().pagination).toEqual({ has_more: false, next_cursor: null, limit: 20 });
      const first = (order.items as Array<{ id: string }>)[0]!;
      const one = await request(
        shop.atrium,
        'GET',
        `/api/v2/orders/${order.id}/items/${first.id}`,
        shop.owner,
      );
      expect(one.json()).toEqual(first);
      expect(
        (await request(shop.atrium, 'GET', `/api/v2/orders/${order.id}/items/itm_nope`, shop.owner))
          .statusCode,
      ).toBe(404);
      expect((await items(order.id, stranger)).statusCode).toBe(403);
    });

    it('pages the items like every list: limit 1 to 100 (default 20), cursor to resume, oldest first', async () => {
      const body = orderBody(shop.cat, {
        items: Array.from({ length: 25 }, (_, i) => ({ product_id: shop.cat.widget, quantity: i + 1 })),
      });
      const order = await createOrder(shop.atrium, shop.owner, body);
      const all = order.items as Array<{ id: string; quantity: number }>;
      expect(all.map((i) => i.quantity)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));

      const first = await items(order.id);
      expect(first.json().data).toEqual(all.slice(0, 20));
      expect(first.json().pagination).toMatchObject({ has_more: true, limit: 20 });
      const cursor = first.json().pagination.next_cursor as string;
      const second = await request(
        shop.atrium,
        'GET',
        `/api/v2/orders/${order.id}/items?cursor=${cursor}`,
        shop.owner,
      );
      expect(second.json()).toEqual({
        data: all.slice(20),
        pagination: { has_more: false, next_cursor: null, limit: 20 },
      });

      // Page by page with limit=10: every item once, in order; an item removed meanwhile moves nothing.
      const seen: unknown[] = [];
      let next: string | null = null;
      do {
        const query: string = `limit=10${next ? `&cursor=${next}` : ''}`;
        const page = await request(
          shop.atrium,
          'GET',
          `/api/v2/orders/${order.id}/items?${query}`,
          shop.owner,
        );
        expect(page.statusCode).toBe(200);
        expect(page.json().data.length).toBeLessThanOrEqual(10);
        if (seen.length === 0) expect((await removeItem(order.id, all[0]!.id)).statusCode).toBe(204);
        seen.push(...page.json().data);
        next = page.json().pagination.next_cursor;
      } while (next);
      expect(seen).toEqual(all);

      for (const bad of ['limit=0', 'limit=101', 'limit=abc', 'cursor=', 'cursor=not-a-cursor!']) {
        const res = await request(shop.atrium, 'GET', `/api/v2/orders/${order.id}/items?${bad}`, shop.owner);
        expect(res.statusCode, bad).toBe(400);
        expect(res.json().error, bad).toBe('validation_error');
      }
      // A cursor is bound to its order's list.
      const other = await fresh();
      const elsewhere = await request(
        shop.atrium,
        'GET',
        `/api/v2/orders/${other.id}/items?cursor=${cursor}`,
        shop.owner,
      );
      expect(elsewhere.statusCode).toBe(400);
      expect(elsewhere.json().details).toEqual([
        expect.objectContaining({ field: 'cursor', code: 'invalid_cursor' }),
      ]);
    });

    it('adds an item at the catalogue price: 201, Location, totals updated, order.updated', async () => {
      const order = await createOrder(
        shop.atrium,
        shop.owner,
        orderBody(shop.cat, { coupon_code: 'TENOFF' }),
      );
      const res = await addItem(order.id, { product_id: shop.cat.gadget, quantity: 10 });
      expect(res.statusCode).toBe(201);
      const item = res.json();
      expect(item).toMatchObject({ product_id: shop.cat.gadget, quantity: 10, unit_price_cents: 399 });
      expect(res.headers.location).toBe(`/api/v2/orders/${order.id}/items/${item.id}`);
      const after = await get(order.id);
      expect(after.items).toHaveLength(3);
      expect(after).toMatchObject({
        subtotal_cents: 2899 + 3990,
        discount_cents: 689,
        amount_cents: 6889 - 689,
      });
      expect((await eventsFor(order.id)).map((e) => e.type)).toEqual(['order.created', 'order.updated']);
    });

    it.each([
      ['quantity 0', { quantity: 0 }, 'quantity', 'range_error'],
      ['quantity 1001', { quantity: 1001 }, 'quantity', 'range_error'],
      ['quantity as text', { quantity: 'one' }, 'quantity', 'invalid_type'],
      ['a client price', { unit_price_cents: 1 }, 'unit_price_cents', 'unknown_field'],
    ])('400 for %s', async (_name, change, field, code) => {
      const order = await fresh();
      const res = await addItem(order.id, { product_id: shop.cat.widget, quantity: 1, ...change });
      expect(res.statusCode).toBe(400);
      expect(res.json().details).toContainEqual(expect.objectContaining({ field, code }));
    });

    it('422 for an unknown product and for a 51st item', async () => {
      const order = await fresh();
      const unknown = await addItem(order.id, { product_id: 'prd_nope', quantity: 1 });
      expect(unknown.statusCode).toBe(422);
      expect(unknown.json().details[0]).toMatchObject({ field: 'product_id', code: 'unknown_product' });
      const full = await createOrder(
        shop.atrium,
        shop.owner,
        orderBody(shop.cat, {
          items: Array.from({ length: 50 }, () => ({ product_id: shop.cat.gadget, quantity: 1 })),
        }),
      );
      const res = await addItem(full.id, { product_id: shop.cat.widget, quantity: 1 });
      expect(res.statusCode).toBe(422);
      expect(res.json().details[0]).toMatchObject({ field: 'items', code: 'range_error' });
    });

    it('removes an item (204) with totals recomputed; the last item stays (409)', async () => {
      const order = await fresh();
      const [widgetLine, gadgetLine] = order.items as Array<{ id: string }>;
      const res = await removeItem(order.id, widgetLine!.id);
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(await get(order.id)).toMatchObject({ amount_cents: 399, items: [gadgetLine] });
      const last = await removeItem(order.id, gadgetLine!.id);
      expect(last.statusCode).toBe(409);
      expect((await removeItem(order.id, 'itm_missing')).statusCode).toBe(404);
    });

    it("items of an order in fulfilment are fixed (409), and others' orders are 403", async () => {
      const order = await fresh();
      expect(
        (await addItem(order.id, { product_id: shop.cat.widget, quantity: 1 }, stranger)).statusCode,
      ).toBe(403);
      await advanceTo(shop.atrium, shop.admin, order.id, 'PROCESSING');
      expect((await addItem(order.id, { product_id: shop.cat.widget, quantity: 1 })).statusCode).toBe(409);
      const first = (order.items as Array<{ id: string }>)[0]!;
      expect((await removeItem(order.id, first.id)).statusCode).toBe(409);
    });

    it('items of a missing order are 404', async () => {
      expect((await items('ord_missing')).statusCode).toBe(404);
      expect((await addItem('ord_missing', { product_id: shop.cat.widget, quantity: 1 })).statusCode).toBe(
        404,
      );
    });
  });
});
