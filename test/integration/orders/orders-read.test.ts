import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { type Catalogue, createOrder, type Headers, makeCatalogue, orderBody, request } from './fixtures.js';

describe('GET /api/v2/orders/{order_id}', () => {
  let atrium: TestAtrium;
  let cat: Catalogue;
  let owner: Headers;
  let order: Record<string, unknown> & { id: string };
  const get = (headers: Headers = owner, id = order.id) =>
    request(atrium, 'GET', `/api/v2/orders/${id}`, headers);

  beforeAll(async () => {
    atrium = await startTestAtrium();
    cat = await makeCatalogue(atrium);
    owner = (await atrium.caller()).headers;
    order = await createOrder(atrium, owner, orderBody(cat));
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('answers 200 with the order and its caching headers', async () => {
    const res = await get();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(order);
    expect(res.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(res.headers['cache-control']).toBe('private, max-age=60');
    expect(res.headers['last-modified']).toBe(new Date(order.updated_at as string).toUTCString());
    const vary = String(res.headers.vary).toLowerCase();
    expect(vary).toContain('authorization');
    expect(vary).toContain('x-api-key');
  });

  it('gives the same ETag while the order is unchanged and a new one after a change', async () => {
    const a = await get();
    const b = await get();
    expect(b.headers.etag).toBe(a.headers.etag);
    const other = await createOrder(atrium, owner, orderBody(cat));
    const before = await get(owner, other.id);
    await request(atrium, 'PATCH', `/api/v2/orders/${other.id}`, owner, { currency: 'EUR' });
    const after = await get(owner, other.id);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    const stale = await request(atrium, 'GET', `/api/v2/orders/${other.id}`, {
      ...owner,
      'if-none-match': String(before.headers.etag),
    });
    expect(stale.statusCode).toBe(200);
    expect(stale.json().currency).toBe('EUR');
  });

  it('a HEAD request gets the headers without a body', async () => {
    const res = await request(atrium, 'HEAD', `/api/v2/orders/${order.id}`, owner);
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBeDefined();
    expect(res.body).toBe('');
  });

  describe('conditional requests (RFC 9110)', () => {
    const conditional = async (conditions: Record<string, string>) =>
      request(atrium, 'GET', `/api/v2/orders/${order.id}`, { ...owner, ...conditions });
    let etag: string;
    let lastModified: string;
    beforeAll(async () => {
      const res = await get();
      etag = String(res.headers.etag);
      lastModified = String(res.headers['last-modified']);
    });

    const expectNotModified = (res: Awaited<ReturnType<typeof conditional>>) => {
      expect(res.statusCode).toBe(304);
      expect(res.body).toBe('');
      expect(res.headers.etag).toBe(etag);
      expect(res.headers['cache-control']).toBe('private, max-age=60');
      expect(res.headers['last-modified']).toBe(lastModified);
    };

    it('If-None-Match equal to the ETag: 304 with ETag, Cache-Control, Last-Modified and no body', async () => {
      expectNotModified(await conditional({ 'if-none-match': etag }));
    });

    it('weak comparison: W/"..." matches the strong tag', async () => {
      expectNotModified(await conditional({ 'if-none-match': `W/${etag}` }));
    });

    it('a list of tags matches when any member does', async () => {
      expectNotModified(await conditional({ 'if-none-match': `"nope", W/"other", ${etag}` }));
      expect((await conditional({ 'if-none-match': '"nope", W/"other"' })).statusCode).toBe(200);
    });

    it('* matches an existing order', async () => {
      expectNotModified(await conditional({ 'if-none-match': '*' }));
    });

    it('an unquoted or different tag does not match', async () => {
      expect((await conditional({ 'if-none-match': etag.replace(/"/g, '') })).statusCode).toBe(200);
      expect((await conditional({ 'if-none-match': '"different"' })).statusCode).toBe(200);
    });

    it('If-Modified-Since equal to Last-Modified, or later: 304', async () => {
      expectNotModified(await conditional({ 'if-modified-since': lastModified }));
      const later = new Date(Date.parse(lastModified) + 3_600_000).toUTCString();
      expectNotModified(await conditional({ 'if-modified-since': later }));
    });

    it('If-Modified-Since compares whole seconds: the same second is not modified', async () => {
      const updated = new Date(order.updated_at as string);
      const sameSecond = new Date(Math.floor(updated.getTime() / 1000) * 1000).toUTCString();
      expectNotModified(await conditional({ 'if-modified-since': sameSecond }));
    });

    it('If-Modified-Since one second before the change: 200', async () => {
      const earlier = new Date(Date.parse(lastModified) - 1000).toUTCString();
      const res = await conditional({ 'if-modified-since': earlier });
      expect(res.statusCode).toBe(200);
      expect(res.json().id).toBe(order.id);
    });

    it('the obsolete RFC 850 and asctime date forms are understood', async () => {
      const d = new Date(Date.parse(lastModified) + 86_400_000);
      const [wd, day, mon, year, time] = d.toUTCString().replace(',', '').split(' ');
      const weekday = {
        Sun: 'Sunday',
        Mon: 'Monday',
        Tue: 'Tuesday',
        Wed: 'Wednesday',
        Thu: 'Thursday',
        Fri: 'Friday',
        Sat: 'Saturday',
      }[wd!];
      expectNotModified(
        await conditional({ 'if-modified-since': `${weekday}, ${day}-${mon}-${year!.slice(2)} ${time} GMT` }),
      );
      expectNotModified(
        await conditional({
          'if-modified-since': `${wd} ${mon} ${String(Number(day)).padStart(2, ' ')} ${time} ${year}`,
        }),
      );
    });

    it('an invalid If-Modified-Since is ignored', async () => {
      for (const value of ['yesterday', '0', '2026-13-45', 'Mon, 31 Feb 2026 00:00:00 GMT']) {
        expect((await conditional({ 'if-modified-since': value })).statusCode).toBe(200);
      }
    });

    it('If-None-Match wins over If-Modified-Since', async () => {
      const later = new Date(Date.parse(lastModified) + 3_600_000).toUTCString();
      const res = await conditional({ 'if-none-match': '"different"', 'if-modified-since': later });
      expect(res.statusCode).toBe(200);
      const earlier = new Date(Date.parse(lastModified) - 3_600_000).toUTCString();
      expectNotModified(await conditional({ 'if-none-match': etag, 'if-modified-since': earlier }));
    });

    it("conditions never reveal another caller's order: 403 comes first", async () => {
      const stranger = (await atrium.caller()).headers;
      const res = await request(atrium, 'GET', `/api/v2/orders/${order.id}`, {
        ...stranger,
        'if-none-match': '*',
      });
      expect(res.statusCode).toBe(403);
    });
  });

  describe('who may read', () => {
    it('404 not_found for a missing order, also for an id of the wrong shape', async () => {
      for (const id of ['ord_00000000000000000000000000', 'nonsense', '%20', 'ord_%00x']) {
        const res = await get(owner, id);
        expect(res.statusCode).toBe(404);
        expect(res.json().error).toBe('not_found');
      }
    });

    it("403 forbidden for another caller's order", async () => {
      const stranger = (await atrium.caller()).headers;
      const res = await get(stranger);
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toBe('forbidden');
    });

    it('an admin may read any order', async () => {
      const admin = (await atrium.caller({ role: 'admin' })).headers;
      const res = await get(admin);
      expect(res.statusCode).toBe(200);
      expect(res.json().id).toBe(order.id);
    });

    it('a viewer (orders:read only) may read their own orders', async () => {
      const viewer = await atrium.caller({ role: 'viewer' });
      const own = await atrium.services.core.orders.create(
        { id: viewer.userId, kind: 'user', role: 'viewer' },
        {
          items: [{ productId: cat.widget, quantity: 1 }],
          currency: 'GBP',
          shippingAddress: { name: 'V', street: 'S', city: 'C', postalCode: 'P', country: 'GB' },
        },
      );
      const res = await get(viewer.headers, own.id);
      expect(res.statusCode).toBe(200);
      expect(res.json().currency).toBe('GBP');
    });

    it('401 without credentials and for a revoked key', async () => {
      expect((await get({})).statusCode).toBe(401);
      const caller = await atrium.caller();
      await atrium.services.apiKeys.revoke(caller.keyId);
      const res = await get(caller.headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_api_key');
    });
  });
});
