import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUPON_CODE_PATTERN, COUPON_CODE_RULE } from '../../../src/domain/coupons.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import {
  type Catalogue,
  type Headers,
  makeCatalogue,
  orderBody,
  request,
  orderCount as countOrders,
} from './fixtures.js';

describe('POST /api/v2/orders', () => {
  let atrium: TestAtrium;
  let cat: Catalogue;
  let member: Headers;

  const post = (body: unknown, headers: Headers = member) =>
    request(atrium, 'POST', '/api/v2/orders', headers, body);
  const orderCount = () => countOrders(atrium);

  beforeAll(async () => {
    atrium = await startTestAtrium();
    cat = await makeCatalogue(atrium);
    member = (await atrium.caller()).headers;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('creates an order priced from the catalogue: 201, Location and the v2 body', async () => {
    const res = await post(orderBody(cat));
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(res.headers.location).toBe(`/api/v2/orders/${body.id}`);
    expect(body.id).toMatch(/^ord_[0-9a-z]{26}$/);
    expect(body).toMatchObject({
      amount_cents: 2 * 1250 + 399,
      subtotal_cents: 2899,
      discount_cents: 0,
      currency: 'USD',
      status: 'PENDING',
      coupon_code: null,
      refunded: false,
      refunded_at: null,
      shipping_address: { country: 'GB', postal_code: 'SW1Y 4JH' },
    });
    expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
    expect(body.items).toHaveLength(2);
    expect(body.items[0]).toMatchObject({ product_id: cat.widget, quantity: 2, unit_price_cents: 1250 });
    expect(body.items[0].id).toMatch(/^itm_/);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('applies a percentage coupon (case-insensitive) and a fixed-amount coupon', async () => {
    const pct = (await post(orderBody(cat, { coupon_code: 'tenoff' }))).json();
    expect(pct).toMatchObject({
      coupon_code: 'TENOFF',
      subtotal_cents: 2899,
      discount_cents: 290,
      amount_cents: 2609,
    });
    const fixed = (await post(orderBody(cat, { coupon_code: 'FIVEBUCKS' }))).json();
    expect(fixed).toMatchObject({ coupon_code: 'FIVEBUCKS', discount_cents: 500, amount_cents: 2399 });
    const none = await post(orderBody(cat, { coupon_code: null }));
    expect(none.statusCode).toBe(201);
    expect(none.json().coupon_code).toBeNull();
  });

  it('never takes a price from the client', async () => {
    const body = orderBody(cat);
    const res = await post({
      ...body,
      items: [{ product_id: cat.widget, quantity: 1, unit_price_cents: 1 }],
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toContainEqual(
      expect.objectContaining({ field: 'items[0].unit_price_cents', code: 'unknown_field' }),
    );
    const amount = await post({ ...body, amount_cents: 1 });
    expect(amount.statusCode).toBe(400);
  });

  it('writes order.created with the v2 order as data (times in Unix seconds), in the outbox', async () => {
    const created = (await post(orderBody(cat))).json();
    const event = await atrium.services.store.db
      .selectFrom('events')
      .selectAll()
      .where('type', '=', 'order.created')
      .where('data', 'like', `%${created.id}%`)
      .executeTakeFirstOrThrow();
    // The v2 order, its timestamps as Unix seconds (webhook timestamps; REST shows ISO strings).
    const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
    expect(JSON.parse(event.data)).toEqual({
      ...created,
      created_at: seconds(created.created_at),
      updated_at: seconds(created.updated_at),
    });
    expect(event.id).toMatch(/^evt_/);
  });

  describe('bad input gives 400 validation_error with details', () => {
    const cases: Array<[string, () => unknown, string | null, string]> = [
      ['no items', () => orderBody(cat, { items: [] }), 'items', 'range_error'],
      [
        '51 items',
        () =>
          orderBody(cat, {
            items: Array.from({ length: 51 }, () => ({ product_id: cat.widget, quantity: 1 })),
          }),
        'items',
        'range_error',
      ],
      [
        'quantity 0',
        () => orderBody(cat, { items: [{ product_id: cat.widget, quantity: 0 }] }),
        'items[0].quantity',
        'range_error',
      ],
      [
        'quantity 1001',
        () => orderBody(cat, { items: [{ product_id: cat.widget, quantity: 1001 }] }),
        'items[0].quantity',
        'range_error',
      ],
      [
        'quantity as a string',
        () => orderBody(cat, { items: [{ product_id: cat.widget, quantity: '2' }] }),
        'items[0].quantity',
        'invalid_type',
      ],
      [
        'fractional quantity',
        () => orderBody(cat, { items: [{ product_id: cat.widget, quantity: 1.5 }] }),
        'items[0].quantity',
        'invalid_type',
      ],
      [
        'items not an array',
        () => orderBody(cat, { items: { product_id: cat.widget } }),
        'items',
        'invalid_type',
      ],
      [
        'item without product_id',
        () => orderBody(cat, { items: [{ quantity: 1 }] }),
        'items[0].product_id',
        'required',
      ],
      ['unknown currency', () => orderBody(cat, { currency: 'JPY' }), 'currency', 'invalid_enum'],
      ['lower-case currency', () => orderBody(cat, { currency: 'usd' }), 'currency', 'invalid_enum'],
      ['currency as a number', () => orderBody(cat, { currency: 840 }), 'currency', 'invalid_type'],
      [
        'missing currency',
        () => ({ items: orderBody(cat).items, shipping_address: orderBody(cat).shipping_address }),
        'currency',
        'required',
      ],
      [
        'missing items',
        () => ({ currency: 'USD', shipping_address: orderBody(cat).shipping_address }),
        'items',
        'required',
      ],
      [
        'missing address',
        () => ({ currency: 'USD', items: orderBody(cat).items }),
        'shipping_address',
        'required',
      ],
      [
        'address without street',
        () => orderBody(cat, { shipping_address: { name: 'A', city: 'B', postal_code: '1', country: 'US' } }),
        'shipping_address.street',
        'required',
      ],
      [
        'blank city',
        () => orderBody(cat, { shipping_address: { ...orderBody(cat).shipping_address, city: '   ' } }),
        'shipping_address.city',
        'range_error',
      ],
      [
        'lower-case country',
        () => orderBody(cat, { shipping_address: { ...orderBody(cat).shipping_address, country: 'gb' } }),
        'shipping_address.country',
        'invalid_format',
      ],
      [
        'unassigned country code',
        () => orderBody(cat, { shipping_address: { ...orderBody(cat).shipping_address, country: 'ZZ' } }),
        'shipping_address.country',
        'invalid_enum',
      ],
      ['coupon as a number', () => orderBody(cat, { coupon_code: 10 }), 'coupon_code', 'invalid_type'],
      [
        'coupon with spaces',
        () => orderBody(cat, { coupon_code: 'TEN OFF' }),
        'coupon_code',
        'invalid_format',
      ],
      [
        // "ﬀ" upper-cases to "FF": read as TENOFF, it took 10 % off until the letters were checked first.
        'coupon whose upper case is an existing ASCII code',
        () => orderBody(cat, { coupon_code: 'teno\ufb00' }),
        'coupon_code',
        'invalid_format',
      ],
      ['unknown top-level field', () => orderBody(cat, { status: 'SHIPPED' }), 'status', 'unknown_field'],
    ];
    it.each(cases)('%s', async (_name, body, field, code) => {
      const before = await orderCount();
      const res = await post(body());
      expect(res.statusCode).toBe(400);
      const json = res.json();
      expect(json.error).toBe('validation_error');
      expect(json.request_id).toBe(res.headers['x-request-id']);
      expect(json.details).toContainEqual(expect.objectContaining({ field, code }));
      expect(await orderCount()).toBe(before);
    });

    it("a coupon code is refused by the pattern the document publishes, in the core's words", async () => {
      const doc = await request(atrium, 'GET', '/openapi.json', member);
      // The document's text: the pattern, as JSON writes it, wherever the body schema sits.
      expect(JSON.stringify(doc.json())).toContain(JSON.stringify(COUPON_CODE_PATTERN));
      for (const code of ['TEN OFF', 'teno\ufb00', '-X']) {
        const res = await post(orderBody(cat, { coupon_code: code }));
        expect(res.statusCode, code).toBe(400);
        expect(res.json().details, code).toEqual([
          { field: 'coupon_code', message: `coupon_code ${COUPON_CODE_RULE}`, code: 'invalid_format' },
        ]);
      }
      const padded = await post(orderBody(cat, { coupon_code: ' tenoff ' }));
      expect(padded.statusCode).toBe(201);
      expect(padded.json().coupon_code).toBe('TENOFF');
      // The bound of 64 is on the code, as GraphQL and the core apply it: padding around a valid
      // code is trimmed, not counted, and a 65th character of the code itself is refused.
      const wide = await post(orderBody(cat, { coupon_code: `tenoff${' '.repeat(70)}` }));
      expect(wide.statusCode).toBe(201);
      expect(wide.json().coupon_code).toBe('TENOFF');
      const long = await post(orderBody(cat, { coupon_code: 'A'.repeat(65) }));
      expect(long.statusCode).toBe(400);
      expect(long.json().details).toEqual([
        { field: 'coupon_code', message: `coupon_code ${COUPON_CODE_RULE}`, code: 'invalid_format' },
      ]);
    });

    it('malformed JSON', async () => {
      const res = await post('{"items": [');
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'validation_error', details: [{ code: 'invalid_json' }] });
    });

    it('a JSON array or null instead of an object', async () => {
      expect((await post('[]')).statusCode).toBe(400);
      expect((await post('null')).statusCode).toBe(400);
    });

    it('a body that is not JSON, text/plain included, is 415 unsupported_media_type', async () => {
      const send = (type: string) =>
        atrium.http!.inject({
          method: 'POST',
          url: '/api/v2/orders',
          headers: { ...member, 'content-type': type },
          payload: '<items/>',
        });
      for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/xml']) {
        const res = await send(type);
        expect(res.statusCode, type).toBe(415);
        expect(res.json().error, type).toBe('unsupported_media_type');
      }
    });
  });

  describe('semantically invalid values give 422 and create nothing', () => {
    it('unknown product, naming each bad line', async () => {
      const before = await orderCount();
      const res = await post(
        orderBody(cat, {
          items: [
            { product_id: cat.widget, quantity: 1 },
            { product_id: 'prd_doesnotexist', quantity: 1 },
          ],
        }),
      );
      expect(res.statusCode).toBe(422);
      expect(res.json()).toMatchObject({
        error: 'validation_error',
        details: [{ field: 'items[1].product_id', code: 'unknown_product' }],
      });
      expect(await orderCount()).toBe(before);
    });

    it('a product id no store could hold (NUL byte) is an unknown product, never a 500', async () => {
      const res = await post(orderBody(cat, { items: [{ product_id: 'prd_\u0000x', quantity: 1 }] }));
      expect(res.statusCode).toBe(422);
      expect(res.json().details[0]).toMatchObject({ field: 'items[0].product_id', code: 'unknown_product' });
    });

    it('a product no longer sold', async () => {
      const res = await post(orderBody(cat, { items: [{ product_id: cat.retired, quantity: 1 }] }));
      expect(res.statusCode).toBe(422);
      expect(res.json().details[0]).toMatchObject({
        field: 'items[0].product_id',
        code: 'product_unavailable',
      });
    });

    it('unknown and deactivated coupons', async () => {
      for (const code of ['NOPE', 'OLD']) {
        const res = await post(orderBody(cat, { coupon_code: code }));
        expect(res.statusCode).toBe(422);
        expect(res.json().details[0]).toMatchObject({ field: 'coupon_code', code: 'unknown_coupon' });
      }
    });

    it('a total beyond what an order may hold (no 500 on a 32-bit column)', async () => {
      const res = await post(orderBody(cat, { items: [{ product_id: cat.pricey, quantity: 22 }] }));
      expect(res.statusCode).toBe(422);
      expect(res.json().details[0]).toMatchObject({ field: 'items', code: 'range_error' });
    });
  });

  describe('callers', () => {
    it('401 without credentials, before the body is looked at', async () => {
      const res = await post({ nonsense: true }, {});
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
    });

    it('401 invalid_api_key for a revoked key', async () => {
      const caller = await atrium.caller();
      expect((await post(orderBody(cat), caller.headers)).statusCode).toBe(201);
      await atrium.services.apiKeys.revoke(caller.keyId);
      const res = await post(orderBody(cat), caller.headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_api_key');
    });

    it('401 for an unknown key', async () => {
      const res = await post(orderBody(cat), {
        'x-api-key': 'atr_test_00000000000000000000000000000000_000000',
      });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_api_key');
    });

    it('403 naming orders:write for a viewer, whose key only reads', async () => {
      const viewer = await atrium.caller({ role: 'viewer' });
      const res = await post(orderBody(cat), viewer.headers);
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toBe('insufficient_scope');
      expect(res.json().message).toContain('orders:write');
    });
  });
});
