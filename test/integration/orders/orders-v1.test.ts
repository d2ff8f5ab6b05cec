import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { startTestAtrium } from '../../helpers/atrium.js';
import { advanceTo, orderBody, request, shopForSuite } from './fixtures.js';

describe('/api/v1 orders: the deprecated version', () => {
  const shop = shopForSuite({ V1_SUNSET: '2027-01-31' });
  /** A PENDING order of orderBody's items, created through v1 by the shop's owner; its v1 body. */
  const createV1 = async () =>
    (await request(shop.atrium, 'POST', '/api/v1/orders', shop.owner, orderBody(shop.cat))).json();
  const SUNSET = 'Sun, 31 Jan 2027 00:00:00 GMT';

  const expectDeprecated = (res: LightMyRequestResponse, successor: string) => {
    expect(res.headers.deprecation).toBe('true');
    expect(res.headers.sunset).toBe(SUNSET);
    expect(res.headers.link).toBe(`<${successor}>; rel="successor-version"`);
  };

  it('creates with the v1 representation, a v1 Location and the deprecation headers', async () => {
    const res = await request(
      shop.atrium,
      'POST',
      '/api/v1/orders',
      shop.owner,
      orderBody(shop.cat, { coupon_code: 'TENOFF' }),
    );
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({ id: body.id, amount: '26.09', status: 'PENDING' });
    expect(res.headers.location).toBe(`/api/v1/orders/${body.id}`);
    expectDeprecated(res, '/api/v2/orders');
  });

  it('reads one order as {id, amount, status}, linking to the v2 path of the same order', async () => {
    const created = await createV1();
    const res = await request(shop.atrium, 'GET', `/api/v1/orders/${created.id}`, shop.owner);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: created.id, amount: '28.99', status: 'PENDING' });
    expectDeprecated(res, `/api/v2/orders/${created.id}`);
    const v2 = await request(shop.atrium, 'GET', `/api/v2/orders/${created.id}`, shop.owner);
    expect(v2.json().amount_cents).toBe(2899);
    expect(v2.headers.deprecation).toBeUndefined();
    expect(v2.headers.sunset).toBeUndefined();
  });

  it('formats amounts with exactly two fraction digits', async () => {
    const cheap = await shop.atrium.services.core.products.create({ name: 'Penny sweet', priceCents: 5 });
    const created = (
      await request(
        shop.atrium,
        'POST',
        '/api/v1/orders',
        shop.owner,
        orderBody(shop.cat, { items: [{ product_id: cheap.id, quantity: 1 }] }),
      )
    ).json();
    expect(created.amount).toBe('0.05');
    const round = await shop.atrium.services.core.products.create({ name: 'Round', priceCents: 1000 });
    const ten = (
      await request(
        shop.atrium,
        'POST',
        '/api/v1/orders',
        shop.owner,
        orderBody(shop.cat, { items: [{ product_id: round.id, quantity: 7 }] }),
      )
    ).json();
    expect(ten.amount).toBe('70.00');
  });

  it('lists in the v1 representation within the same envelope', async () => {
    const res = await request(shop.atrium, 'GET', '/api/v1/orders?limit=2', shop.owner);
    expect(res.statusCode).toBe(200);
    const page = res.json();
    expect(page.pagination).toMatchObject({ limit: 2, has_more: true });
    for (const o of page.data) expect(Object.keys(o).sort()).toEqual(['amount', 'id', 'status']);
    expectDeprecated(res, '/api/v2/orders');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('mirrors items, changes and actions, each with the headers', async () => {
    const created = await createV1();
    const items = await request(shop.atrium, 'GET', `/api/v1/orders/${created.id}/items`, shop.owner);
    expect(items.json().data[0]).toMatchObject({
      product_id: shop.cat.widget,
      quantity: 2,
      unit_price: '12.50',
    });
    expectDeprecated(items, `/api/v2/orders/${created.id}/items`);
    const added = await request(shop.atrium, 'POST', `/api/v1/orders/${created.id}/items`, shop.owner, {
      product_id: shop.cat.gadget,
      quantity: 1,
    });
    expect(added.statusCode).toBe(201);
    expect(added.headers.location).toMatch(new RegExp(`^/api/v1/orders/${created.id}/items/itm_`));
    const patched = await request(shop.atrium, 'PATCH', `/api/v1/orders/${created.id}`, shop.owner, {
      coupon_code: 'FIVEBUCKS',
    });
    expect(patched.json()).toEqual({ id: created.id, amount: '27.98', status: 'PENDING' });
    await advanceTo(shop.atrium, shop.admin, created.id, 'SHIPPED');
    const refund = await request(shop.atrium, 'POST', `/api/v1/orders/${created.id}/refund`, shop.owner);
    expect(refund.statusCode).toBe(204);
    expectDeprecated(refund, `/api/v2/orders/${created.id}/refund`);
  });

  it('conditional GET works on v1 as well', async () => {
    const created = await createV1();
    const first = await request(shop.atrium, 'GET', `/api/v1/orders/${created.id}`, shop.owner);
    const again = await request(shop.atrium, 'GET', `/api/v1/orders/${created.id}`, {
      ...shop.owner,
      'if-none-match': String(first.headers.etag),
    });
    expect(again.statusCode).toBe(304);
    expectDeprecated(again, `/api/v2/orders/${created.id}`);
  });

  describe('errors carry the headers too', () => {
    it.each([
      ['401 without credentials', 'GET', '/api/v1/orders', {}, undefined, 401, '/api/v2/orders'],
      [
        '404 for a missing order',
        'GET',
        '/api/v1/orders/ord_missing',
        'owner',
        undefined,
        404,
        '/api/v2/orders/ord_missing',
      ],
      ['400 for a bad limit', 'GET', '/api/v1/orders?limit=0', 'owner', undefined, 400, '/api/v2/orders'],
      ['400 for a bad body', 'POST', '/api/v1/orders', 'owner', { items: [] }, 400, '/api/v2/orders'],
    ] as const)('%s', async (_name, method, url, who, body, status, successor) => {
      const headers = who === 'owner' ? shop.owner : {};
      const res = await request(shop.atrium, method, url, headers, body);
      expect(res.statusCode).toBe(status);
      expectDeprecated(res, successor);
    });

    it('409 for a forbidden transition', async () => {
      const created = await createV1();
      await request(shop.atrium, 'POST', `/api/v1/orders/${created.id}/cancel`, shop.owner);
      const res = await request(shop.atrium, 'POST', `/api/v1/orders/${created.id}/cancel`, shop.owner);
      expect(res.statusCode).toBe(409);
      expectDeprecated(res, `/api/v2/orders/${created.id}/cancel`);
    });

    it('429 once the rate limit is spent', async () => {
      const free = await shop.atrium.caller({ tier: 'free' });
      let last = await request(shop.atrium, 'GET', '/api/v1/orders', free.headers);
      for (let i = 0; i < 100 && last.statusCode !== 429; i++) {
        last = await request(shop.atrium, 'GET', '/api/v1/orders', free.headers);
      }
      expect(last.statusCode).toBe(429);
      expect(last.json().error).toBe('rate_limit_exceeded');
      expectDeprecated(last, '/api/v2/orders');
    });

    it('a revoked key', async () => {
      const caller = await shop.atrium.caller();
      await shop.atrium.services.apiKeys.revoke(caller.keyId);
      const res = await request(shop.atrium, 'GET', '/api/v1/orders', caller.headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_api_key');
      expectDeprecated(res, '/api/v2/orders');
    });
  });

  it('CORS preflights of v1 paths carry the headers as well', async () => {
    const cors = await startTestAtrium({ V1_SUNSET: '2027-01-31', CORS_ORIGINS: 'https://app.example.com' });
    try {
      const res = await cors.http!.inject({
        method: 'OPTIONS',
        url: '/api/v1/orders',
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
      });
      expect(res.statusCode).toBe(204);
      expectDeprecated(res, '/api/v2/orders');
    } finally {
      await cors.stop();
    }
  });

  it('a path no route serves is deprecated still but names no successor; a 405 keeps its link', async () => {
    for (const url of ['/api/v1/nope', '/api/v1/orders/x/nope', '/api/v1']) {
      const res = await request(shop.atrium, 'GET', url, shop.owner);
      expect(res.statusCode, url).toBe(404);
      expect(res.headers.deprecation, url).toBe('true');
      expect(res.headers.sunset, url).toBe(SUNSET);
      expect(res.headers.link, url).toBeUndefined();
    }
    const wrongMethod = await request(shop.atrium, 'PUT', '/api/v1/orders', shop.owner, {});
    expect(wrongMethod.statusCode).toBe(405);
    expectDeprecated(wrongMethod, '/api/v2/orders');
  });

  it('the successor link keeps the path encoded', async () => {
    const res = await request(shop.atrium, 'GET', '/api/v1/orders/a%3Eb', shop.owner);
    expect(res.statusCode).toBe(404);
    expect(res.headers.link).toBe('</api/v2/orders/a%3Eb>; rel="successor-version"');
  });
});
