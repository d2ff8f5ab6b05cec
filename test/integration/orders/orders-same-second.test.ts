import { describe, expect, it } from 'vitest';
import type { RestAnswer } from '../../helpers/rest-client.js';
import { expectPreconditionFailed, orderBody, type SocketShop, socketShopForSuite } from './fixtures.js';

/**
 * Last-Modified is an HTTP date, whole seconds. When an order changes twice within one second the
 * date stays the same, so RFC 9110 §8.8.2.2 makes it a weak validator: If-Modified-Since naming
 * that second is not 304 and If-Unmodified-Since naming it is 412. Until 2026-11-29 both compared
 * the seconds alone: a cache kept the older copy (304) and a writer conditioned on the date
 * silently overwrote a change made in the same second. Over a real socket, v1 and v2.
 */
describe('Last-Modified of an order changed twice in one second is weak', () => {
  const shop = socketShopForSuite();
  const send: SocketShop['send'] = (...request) => shop.send(...request);

  const ok = (res: RestAnswer, status = 200) => {
    expect(res.status, res.text).toBe(status);
    return res;
  };

  /** A new order (v2 POST) and its path in `version`. */
  async function create(version: 'v1' | 'v2') {
    const created = ok(await send('POST', '/api/v2/orders', {}, orderBody(shop.cat)), 201);
    const body = created.body as { id: string; created_at: string };
    return { path: `/api/${version}/orders/${body.id}`, createdAt: body.created_at };
  }

  /**
   * Writer A reads the order after one change (ETag and Last-Modified L), then writer B changes it
   * again within the same second, so Last-Modified is still L. A pair split by a second boundary
   * proves nothing and is tried again on a new order; no test depends on how fast this runs.
   */
  async function changedTwiceInOneSecond(version: 'v1' | 'v2') {
    for (let attempt = 0; attempt < 50; attempt++) {
      const { path } = await create(version);
      ok(await send('PATCH', path, {}, { coupon_code: 'FIVEBUCKS' }));
      const a = ok(await send('GET', path));
      const b = ok(await send('PATCH', path, {}, { coupon_code: 'TENOFF' }));
      const lastModified = a.headers.get('last-modified')!;
      if (b.headers.get('last-modified') !== lastModified) continue;
      expect(b.headers.get('etag')).not.toBe(a.headers.get('etag'));
      return { path, lastModified, etagA: a.headers.get('etag')!, bodyA: a.body, current: b };
    }
    throw new Error('no two PATCHes landed in one second in 50 tries');
  }

  /** Until the wall clock (the server's, in this process) is past the second `lastModified` names. */
  const pastSecondOf = async (lastModified: string) => {
    const next = Date.parse(lastModified) + 1000;
    while (Date.now() < next) await new Promise((r) => setTimeout(r, next - Date.now() + 5));
  };

  for (const version of ['v2', 'v1'] as const) {
    describe(version, () => {
      it("If-Modified-Since naming that second is 200 with B's change, not 304", async () => {
        const o = await changedTwiceInOneSecond(version);
        const res = ok(await send('GET', o.path, { 'if-modified-since': o.lastModified }));
        expect(res.body).toEqual(o.current.body);
        expect(res.body).not.toEqual(o.bodyA);
        expect(res.headers.get('last-modified')).toBe(o.lastModified);
        // The ETag tells the two versions apart, as before.
        ok(await send('GET', o.path, { 'if-none-match': o.etagA }));
      });

      it('If-None-Match keeps precedence over If-Modified-Since: the current tag is 304', async () => {
        const o = await changedTwiceInOneSecond(version);
        const res = await send('GET', o.path, {
          'if-none-match': o.current.headers.get('etag')!,
          'if-modified-since': o.lastModified,
        });
        expect(res.status).toBe(304);
      });

      it("If-Unmodified-Since naming that second is 412: writer A cannot overwrite B's change", async () => {
        const o = await changedTwiceInOneSecond(version);
        for (const [method, json] of [
          ['PATCH', { coupon_code: null }],
          ['PUT', orderBody(shop.cat, { currency: 'GBP' })],
          ['DELETE', undefined],
          ['POST /cancel', undefined],
        ] as const) {
          const path = method === 'POST /cancel' ? `${o.path}/cancel` : o.path;
          expectPreconditionFailed(
            await send(method.split(' ')[0]!, path, { 'if-unmodified-since': o.lastModified }, json),
          );
        }
        const after = ok(await send('GET', o.path));
        expect(after.body).toEqual(o.current.body);
        expect(after.headers.get('etag')).toBe(o.current.headers.get('etag'));
      });

      it('If-Match keeps precedence over If-Unmodified-Since: the current tag lets the write through', async () => {
        const o = await changedTwiceInOneSecond(version);
        expectPreconditionFailed(
          await send(
            'PATCH',
            o.path,
            { 'if-match': o.etagA, 'if-unmodified-since': o.lastModified },
            {
              coupon_code: null,
            },
          ),
        );
        ok(
          await send(
            'PATCH',
            o.path,
            { 'if-match': o.current.headers.get('etag')!, 'if-unmodified-since': o.lastModified },
            { coupon_code: null },
          ),
        );
      });

      it('one change in that second: If-Modified-Since is 304 and If-Unmodified-Since passes', async () => {
        // Created only: its creation is the one change.
        const { path } = await create(version);
        const read = ok(await send('GET', path));
        const lastModified = read.headers.get('last-modified')!;
        const res = await send('GET', path, { 'if-modified-since': lastModified });
        expect(res.status).toBe(304);
        expect(res.headers.get('etag')).toBe(read.headers.get('etag'));
        ok(await send('PATCH', path, { 'if-unmodified-since': lastModified }, { coupon_code: 'TENOFF' }));
      });

      it('a change in a later second makes the date strong again', async () => {
        const o = await changedTwiceInOneSecond(version);
        await pastSecondOf(o.lastModified);
        const third = ok(await send('PATCH', o.path, {}, { coupon_code: null }));
        const lastModified = third.headers.get('last-modified')!;
        expect(lastModified).not.toBe(o.lastModified);
        const res = await send('GET', o.path, { 'if-modified-since': lastModified });
        expect(res.status).toBe(304);
        expect(res.headers.get('etag')).toBe(third.headers.get('etag'));
        ok(await send('PATCH', o.path, { 'if-unmodified-since': lastModified }, { coupon_code: 'TENOFF' }));
      });
    });
  }
});
