import { describe, expect, it } from 'vitest';
import { call } from '../../helpers/rest-client.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { expectPreconditionFailed, orderBody, type SocketShop, socketShopForSuite } from './fixtures.js';

/**
 * Conditional writes (RFC 9110 §13.1.1, §13.1.4, §13.2.2) as a client sees them over a real socket:
 * If-Match (strong comparison, lists, `*`) and, without it, If-Unmodified-Since on every write of an
 * order, v1 and v2. A false condition is 412 precondition_failed and changes nothing. Until
 * 2026-11-28 both headers were ignored, so two writers silently overwrote each other.
 */
describe('conditional writes of an order (If-Match, If-Unmodified-Since)', () => {
  const shop = socketShopForSuite();
  const send: SocketShop['send'] = (...request) => shop.send(...request);

  /** A new PENDING order and the validators a GET of it in `version` hands out. */
  async function fresh(version: 'v1' | 'v2' = 'v2') {
    const created = await call(shop.base, 'POST', '/api/v2/orders', {
      headers: shop.owner,
      json: orderBody(shop.cat),
    });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const path = `/api/${version}/orders/${id}`;
    const read = await send('GET', path);
    expect(read.status).toBe(200);
    return {
      id,
      path,
      etag: read.headers.get('etag')!,
      lastModified: read.headers.get('last-modified')!,
      body: read.body!,
    };
  }

  /** The order as a GET answers it now: body and ETag, to show a refused write changed nothing. */
  const now = async (path: string) => {
    const res = await send('GET', path);
    return { status: res.status, body: res.body, etag: res.headers.get('etag') };
  };

  const PAST = 'Mon, 01 Jan 2001 00:00:00 GMT';
  const FUTURE = 'Fri, 01 Jan 2100 00:00:00 GMT';
  const replacement = () =>
    orderBody(shop.cat, { items: [{ product_id: shop.cat.gadget, quantity: 3 }], currency: 'GBP' });

  describe('If-Match', () => {
    it("the tester's report: a PATCH with the ETag from before another writer's change is 412", async () => {
      const o = await fresh();
      const first = await send('PATCH', o.path, {}, { currency: 'EUR' });
      expect(first.status).toBe(200);
      const after = await now(o.path);
      expect(after.etag).not.toBe(o.etag);
      expectPreconditionFailed(await send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'GBP' }));
      expect(await now(o.path)).toEqual(after);
      expect(after.body?.currency).toBe('EUR');
    });

    it('a stale tag on PATCH, PUT and DELETE is 412 and leaves the order as it was', async () => {
      const o = await fresh();
      const before = await now(o.path);
      expectPreconditionFailed(await send('PATCH', o.path, { 'if-match': '"stale"' }, { currency: 'GBP' }));
      expectPreconditionFailed(await send('PUT', o.path, { 'if-match': '"stale"' }, replacement()));
      expectPreconditionFailed(await send('DELETE', o.path, { 'if-match': '"stale"' }));
      expect(await now(o.path)).toEqual(before);
    });

    it('the current tag lets PATCH, PUT and DELETE through', async () => {
      const o = await fresh();
      const patched = await send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'EUR' });
      expect(patched.status).toBe(200);
      expect(patched.body?.currency).toBe('EUR');
      const afterPatch = await now(o.path);
      const put = await send('PUT', o.path, { 'if-match': afterPatch.etag! }, replacement());
      expect(put.status).toBe(200);
      expect(put.body?.currency).toBe('GBP');
      const afterPut = await now(o.path);
      expect((await send('DELETE', o.path, { 'if-match': afterPut.etag! })).status).toBe(204);
      expect((await now(o.path)).status).toBe(404);
    });

    it('a 200 PATCH or PUT carries the ETag and Last-Modified of the new representation', async () => {
      const o = await fresh();
      const patched = await send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'EUR' });
      expect(patched.status).toBe(200);
      const read = await send('GET', o.path);
      expect(patched.headers.get('etag')).toBe(read.headers.get('etag'));
      expect(patched.headers.get('last-modified')).toBe(read.headers.get('last-modified'));
      const put = await send('PUT', o.path, { 'if-match': patched.headers.get('etag')! }, replacement());
      expect(put.status).toBe(200);
      expect(put.headers.get('etag')).toBe((await now(o.path)).etag);
    });

    it('* matches the existing order', async () => {
      const o = await fresh();
      expect((await send('PATCH', o.path, { 'if-match': '*' }, { currency: 'EUR' })).status).toBe(200);
      expect((await send('DELETE', o.path, { 'if-match': '*' })).status).toBe(204);
    });

    it('a list matches when one member is the current tag, and not otherwise', async () => {
      const o = await fresh();
      expectPreconditionFailed(await send('PATCH', o.path, { 'if-match': '"a", "b"' }, { currency: 'EUR' }));
      const res = await send('PATCH', o.path, { 'if-match': `"a", ${o.etag}, "b"` }, { currency: 'EUR' });
      expect(res.status).toBe(200);
    });

    it('strong comparison: the weak form of the current tag never matches', async () => {
      const o = await fresh();
      const before = await now(o.path);
      expectPreconditionFailed(
        await send('PATCH', o.path, { 'if-match': `W/${o.etag}` }, { currency: 'EUR' }),
      );
      expectPreconditionFailed(await send('DELETE', o.path, { 'if-match': `W/${o.etag}` }));
      expectPreconditionFailed(
        await send('PATCH', o.path, { 'if-match': o.etag.replace(/"/g, '') }, { currency: 'EUR' }),
      );
      expect(await now(o.path)).toEqual(before);
    });

    it('a stale tag is 412 even when the PATCH would change nothing', async () => {
      const o = await fresh();
      expectPreconditionFailed(await send('PATCH', o.path, { 'if-match': '"stale"' }, {}));
    });

    it("403 and 404 come before the condition: it never reveals another caller's order", async () => {
      const o = await fresh();
      const stranger = (await shop.atrium.caller()).headers;
      const res = await call(shop.base, 'PATCH', o.path, {
        headers: { ...stranger, 'if-match': '"stale"' },
        json: { currency: 'EUR' },
      });
      expect(res.status).toBe(403);
      const missing = await send('DELETE', '/api/v2/orders/ord_00000000000000000000000000', {
        'if-match': '*',
      });
      expect(missing.status).toBe(404);
    });
  });

  describe('If-Unmodified-Since (without If-Match)', () => {
    it('a date before the last change is 412 on PATCH, PUT and DELETE; nothing changes', async () => {
      const o = await fresh();
      const before = await now(o.path);
      expectPreconditionFailed(
        await send('PATCH', o.path, { 'if-unmodified-since': PAST }, { currency: 'EUR' }),
      );
      expectPreconditionFailed(await send('PUT', o.path, { 'if-unmodified-since': PAST }, replacement()));
      expectPreconditionFailed(await send('DELETE', o.path, { 'if-unmodified-since': PAST }));
      const oneSecondEarlier = new Date(Date.parse(o.lastModified) - 1000).toUTCString();
      expectPreconditionFailed(
        await send('PATCH', o.path, { 'if-unmodified-since': oneSecondEarlier }, { currency: 'EUR' }),
      );
      expect(await now(o.path)).toEqual(before);
    });

    it('a later date, or Last-Modified itself (whole seconds), lets the write through', async () => {
      const o = await fresh();
      const same = await send(
        'PATCH',
        o.path,
        { 'if-unmodified-since': o.lastModified },
        { currency: 'EUR' },
      );
      expect(same.status).toBe(200);
      expect((await send('PUT', o.path, { 'if-unmodified-since': FUTURE }, replacement())).status).toBe(200);
      expect((await send('DELETE', o.path, { 'if-unmodified-since': FUTURE })).status).toBe(204);
    });

    it('an unparsable date is ignored', async () => {
      const o = await fresh();
      const res = await send('PATCH', o.path, { 'if-unmodified-since': 'yesterday' }, { currency: 'EUR' });
      expect(res.status).toBe(200);
    });

    it('If-Match takes precedence: If-Unmodified-Since is then not evaluated', async () => {
      const o = await fresh();
      const ok = await send(
        'PATCH',
        o.path,
        { 'if-match': o.etag, 'if-unmodified-since': PAST },
        { currency: 'EUR' },
      );
      expect(ok.status).toBe(200);
      expectPreconditionFailed(
        await send(
          'PATCH',
          o.path,
          { 'if-match': '"stale"', 'if-unmodified-since': FUTURE },
          { currency: 'GBP' },
        ),
      );
    });
  });

  describe('version 1', () => {
    it("compares with the v1 representation's tag: v1 ETag passes, a v2 ETag or a stale one is 412", async () => {
      const v2 = await fresh('v2');
      const v1Path = `/api/v1/orders/${v2.id}`;
      const v1Etag = (await send('GET', v1Path)).headers.get('etag')!;
      expect(v1Etag).not.toBe(v2.etag);
      const before = await now(v1Path);
      expectPreconditionFailed(
        await send('PATCH', v1Path, { 'if-match': v2.etag }, { coupon_code: 'TENOFF' }),
      );
      expect(await now(v1Path)).toEqual(before);
      const res = await send('PATCH', v1Path, { 'if-match': v1Etag }, { coupon_code: 'TENOFF' });
      expect(res.status).toBe(200);
      expect(res.headers.get('deprecation')).toBe('true');
      // The amount changed, so the v1 tag did too: the old one is stale for PUT and DELETE.
      expectPreconditionFailed(await send('PUT', v1Path, { 'if-match': v1Etag }, replacement()));
      const refused = await send('DELETE', v1Path, { 'if-match': v1Etag });
      expectPreconditionFailed(refused);
      expect(refused.headers.get('deprecation')).toBe('true');
      expect((await now(v1Path)).status).toBe(200);
      expectPreconditionFailed(await send('DELETE', v1Path, { 'if-unmodified-since': PAST }));
      expect((await send('DELETE', v1Path, { 'if-match': (await now(v1Path)).etag! })).status).toBe(204);
    });
  });

  describe('items and actions are conditioned on the order they change', () => {
    it('adding or removing an item with a stale tag is 412 and changes nothing; the current tag works', async () => {
      const o = await fresh();
      const before = await now(o.path);
      const items = `${o.path}/items`;
      expectPreconditionFailed(
        await send('POST', items, { 'if-match': '"stale"' }, { product_id: shop.cat.widget, quantity: 1 }),
      );
      const itemId = (o.body.items as { id: string }[])[0]!.id;
      expectPreconditionFailed(await send('DELETE', `${items}/${itemId}`, { 'if-match': '"stale"' }));
      expectPreconditionFailed(await send('DELETE', `${items}/${itemId}`, { 'if-unmodified-since': PAST }));
      expect(await now(o.path)).toEqual(before);
      const added = await send(
        'POST',
        items,
        { 'if-match': o.etag },
        { product_id: shop.cat.widget, quantity: 1 },
      );
      expect(added.status).toBe(201);
      const removed = await send('DELETE', `${items}/${itemId}`, { 'if-match': (await now(o.path)).etag! });
      expect(removed.status).toBe(204);
    });

    it('cancel with a stale tag is 412 and the order stays PENDING; with the current tag it is cancelled', async () => {
      const o = await fresh();
      expectPreconditionFailed(await send('POST', `${o.path}/cancel`, { 'if-match': '"stale"' }));
      expectPreconditionFailed(await send('POST', `${o.path}/cancel`, { 'if-unmodified-since': PAST }));
      expect((await now(o.path)).body?.status).toBe('PENDING');
      expect((await send('POST', `${o.path}/cancel`, { 'if-match': o.etag })).status).toBe(204);
      expect((await now(o.path)).body?.status).toBe('CANCELLED');
    });

    it('refund with a stale tag is 412 and nothing is refunded', async () => {
      const admin = (await shop.atrium.caller({ role: 'admin' })).headers;
      const o = await fresh();
      for (const status of ['PROCESSING', 'SHIPPED']) {
        const res = await call(shop.base, 'PATCH', o.path, { headers: admin, json: { status } });
        expect(res.status).toBe(200);
      }
      const shipped = await now(o.path);
      // The condition comes before the state's rules: stale is 412 even where the change would be 409.
      expect((await send('PATCH', o.path, { 'if-match': shipped.etag! }, { currency: 'EUR' })).status).toBe(
        409,
      );
      expectPreconditionFailed(await send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'EUR' }));
      expectPreconditionFailed(await send('POST', `${o.path}/refund`, { 'if-match': o.etag }));
      expect((await now(o.path)).body?.refunded).toBe(false);
      expect((await send('POST', `${o.path}/refund`, { 'if-match': shipped.etag! })).status).toBe(204);
      expect((await now(o.path)).body?.refunded).toBe(true);
    });
  });

  it('the OpenAPI document gives every conditional write both headers and its 412, v1 and v2', async () => {
    const doc = (await call(shop.base, 'GET', '/openapi.json')).body as {
      paths: Record<
        string,
        Record<string, { parameters?: { in: string; name: string }[]; responses: object }>
      >;
    };
    for (const prefix of ['/api/v1', '/api/v2']) {
      const writes: [string, string][] = [
        [`${prefix}/orders/{order_id}`, 'patch'],
        [`${prefix}/orders/{order_id}`, 'put'],
        [`${prefix}/orders/{order_id}`, 'delete'],
        [`${prefix}/orders/{order_id}/items`, 'post'],
        [`${prefix}/orders/{order_id}/items/{item_id}`, 'delete'],
        [`${prefix}/orders/{order_id}/cancel`, 'post'],
        [`${prefix}/orders/{order_id}/refund`, 'post'],
      ];
      for (const [path, method] of writes) {
        const op = doc.paths[path]![method]!;
        const headers = (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);
        expect(headers, `${method} ${path}`).toEqual(
          expect.arrayContaining(['if-match', 'if-unmodified-since']),
        );
        expect(op.responses, `${method} ${path}`).toHaveProperty('412');
      }
    }
  });

  it('two PATCHes sent at once with the same If-Match: exactly one 200, the other 412', async () => {
    for (let round = 0; round < 5; round += 1) {
      const o = await fresh();
      const [a, b] = await Promise.all([
        send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'EUR' }),
        send('PATCH', o.path, { 'if-match': o.etag }, { currency: 'GBP' }),
      ]);
      expect([a.status, b.status].sort()).toEqual([200, 412]);
      const winner = a.status === 200 ? a : b;
      expect((await now(o.path)).body?.currency).toBe(winner.body?.currency);
    }
  });
});

/**
 * The condition is checked on the order as the write reads it, in the write's transaction (the row
 * locked on PostgreSQL, SQLite's one writer): a second writer cannot check between the first one's
 * check and its write. The first PATCH is held with its UPDATE run and its transaction open; the
 * second, sent with the same If-Match meanwhile, must wait for it and then find the tag stale. A
 * check made before the transaction (or without the lock) would pass it and overwrite the first.
 */
describe('a conditional write checks and writes in one transaction', () => {
  const gate = new StatementGate();
  const shop = socketShopForSuite({ storePlugins: [gate] });

  it('a PATCH with the same If-Match sent while the first one is mid-write waits, then is 412', async () => {
    const created = await call(shop.base, 'POST', '/api/v2/orders', {
      headers: shop.owner,
      json: orderBody(shop.cat),
    });
    const path = `/api/v2/orders/${(created.body as { id: string }).id}`;
    const etag = (await call(shop.base, 'GET', path, { headers: shop.owner })).headers.get('etag')!;
    const patch = (currency: string) =>
      call(shop.base, 'PATCH', path, { headers: { ...shop.owner, 'if-match': etag }, json: { currency } });

    const held = gate.hold('UpdateQueryNode', 'orders');
    const first = patch('EUR');
    await held.reached;
    const second = patch('GBP');
    let secondDone = false;
    void second.then(() => (secondDone = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(secondDone).toBe(false);
    held.release();

    const [a, b] = await Promise.all([first, second]);
    expect(a.status).toBe(200);
    expect(b.status, b.text).toBe(412);
    expect(b.body?.error).toBe('precondition_failed');
    const after = await call(shop.base, 'GET', path, { headers: shop.owner });
    expect(after.body?.currency).toBe('EUR');
    expect(after.headers.get('etag')).toBe(a.headers.get('etag'));
  });
});
