import { describe, expect, it } from 'vitest';
import type { DomainSignal } from '../../../src/events/bus.js';
import { advanceTo, freshOrder, type Headers, orderEvents, request, shopForSuite } from './fixtures.js';

describe('order actions: cancel and refund', () => {
  const shop = shopForSuite();
  const fresh = () => freshOrder(shop);
  const act = (id: string, action: 'cancel' | 'refund', headers: Headers = shop.owner) =>
    request(shop.atrium, 'POST', `/api/v2/orders/${id}/${action}`, headers);
  const get = async (id: string) =>
    (await request(shop.atrium, 'GET', `/api/v2/orders/${id}`, shop.owner)).json();
  const eventTypes = async (id: string) => (await orderEvents(shop.atrium, id)).map((e) => e.type);

  describe('cancel', () => {
    it('cancels a PENDING order: 204 with no body, status CANCELLED, order.cancelled', async () => {
      const order = await fresh();
      const res = await act(order.id, 'cancel');
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(res.headers['content-type']).toBeUndefined();
      expect((await get(order.id)).status).toBe('CANCELLED');
      expect(await eventTypes(order.id)).toEqual(['order.created', 'order.cancelled']);
    });

    it('cancels a PROCESSING order', async () => {
      const order = await fresh();
      await advanceTo(shop.atrium, shop.admin, order.id, 'PROCESSING');
      expect((await act(order.id, 'cancel')).statusCode).toBe(204);
      expect((await get(order.id)).status).toBe('CANCELLED');
    });

    it.each(['SHIPPED', 'DELIVERED'])('409 conflict from %s', async (status) => {
      const order = await fresh();
      await advanceTo(shop.atrium, shop.admin, order.id, status);
      const res = await act(order.id, 'cancel');
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toBe('conflict');
      expect((await get(order.id)).status).toBe(status);
    });

    it('409 for cancelling twice', async () => {
      const order = await fresh();
      await act(order.id, 'cancel');
      expect((await act(order.id, 'cancel')).statusCode).toBe(409);
    });
  });

  describe('refund', () => {
    it.each(['SHIPPED', 'DELIVERED'])(
      'refunds once from %s; the status stays; order.refunded',
      async (status) => {
        const order = await fresh();
        await advanceTo(shop.atrium, shop.admin, order.id, status);
        const res = await act(order.id, 'refund');
        expect(res.statusCode).toBe(204);
        expect(res.body).toBe('');
        const after = await get(order.id);
        expect(after).toMatchObject({ status, refunded: true });
        expect(typeof after.refunded_at).toBe('string');
        const refund = await shop.atrium.services.store.db
          .selectFrom('refunds')
          .selectAll()
          .where('order_id', '=', order.id)
          .executeTakeFirstOrThrow();
        expect(refund.amount_cents).toBe(order.amount_cents);
        expect((await eventTypes(order.id)).at(-1)).toBe('order.refunded');
        const again = await act(order.id, 'refund');
        expect(again.statusCode).toBe(409);
        expect(again.json().message).toContain('already');
      },
    );

    it.each(['PENDING', 'PROCESSING'])('409 from %s', async (status) => {
      const order = await fresh();
      await advanceTo(shop.atrium, shop.admin, order.id, status);
      expect((await act(order.id, 'refund')).statusCode).toBe(409);
      expect((await get(order.id)).refunded).toBe(false);
    });

    it('409 for a cancelled order', async () => {
      const order = await fresh();
      await act(order.id, 'cancel');
      expect((await act(order.id, 'refund')).statusCode).toBe(409);
    });

    it('a refunded SHIPPED order can still be delivered and stays refunded', async () => {
      const shipped = await fresh();
      await advanceTo(shop.atrium, shop.admin, shipped.id, 'SHIPPED');
      await act(shipped.id, 'refund');
      const delivered = await request(shop.atrium, 'PATCH', `/api/v2/orders/${shipped.id}`, shop.admin, {
        status: 'DELIVERED',
      });
      expect(delivered.json()).toMatchObject({ status: 'DELIVERED', refunded: true });
    });
  });

  describe('who may act', () => {
    it("403 for another caller's order; 404 for a missing one; an admin may act on any", async () => {
      const order = await fresh();
      const stranger = (await shop.atrium.caller()).headers;
      expect((await act(order.id, 'cancel', stranger)).statusCode).toBe(403);
      expect((await act('ord_missing', 'cancel')).statusCode).toBe(404);
      expect((await act(order.id, 'cancel', shop.admin)).statusCode).toBe(204);
    });

    it('403 insufficient_scope for a viewer; 401 without credentials', async () => {
      const order = await fresh();
      const viewer = (await shop.atrium.caller({ role: 'viewer' })).headers;
      const res = await act(order.id, 'cancel', viewer);
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toBe('insufficient_scope');
      expect((await act(order.id, 'cancel', {})).statusCode).toBe(401);
    });
  });

  describe('under concurrency', () => {
    it('10 simultaneous cancels: exactly one succeeds and one event is written', async () => {
      const order = await fresh();
      const results = await Promise.all(Array.from({ length: 10 }, () => act(order.id, 'cancel')));
      const codes = results.map((r) => r.statusCode).sort();
      expect(codes.filter((c) => c === 204)).toHaveLength(1);
      expect(codes.filter((c) => c === 409)).toHaveLength(9);
      expect(await eventTypes(order.id)).toEqual(['order.created', 'order.cancelled']);
    });

    it('10 simultaneous refunds: exactly one refund is recorded', async () => {
      const order = await fresh();
      await advanceTo(shop.atrium, shop.admin, order.id, 'DELIVERED');
      const results = await Promise.all(Array.from({ length: 10 }, () => act(order.id, 'refund')));
      expect(results.filter((r) => r.statusCode === 204)).toHaveLength(1);
      expect(results.filter((r) => r.statusCode === 409)).toHaveLength(9);
      const refunds = await shop.atrium.services.store.db
        .selectFrom('refunds')
        .select('id')
        .where('order_id', '=', order.id)
        .execute();
      expect(refunds).toHaveLength(1);
    });
  });

  describe('signals after commit', () => {
    it('sends order.changed once the change is committed, and never for a refused change', async () => {
      const seen: DomainSignal[] = [];
      const off = shop.atrium.services.bus.on('order.changed', (s) => seen.push(s));
      try {
        const order = await fresh();
        await act(order.id, 'cancel');
        await act(order.id, 'cancel'); // refused: no signal
        const mine = seen.filter((s) => s.kind === 'order.changed' && s.orderId === order.id);
        expect(mine).toHaveLength(2);
        expect(mine[0]).toMatchObject({ kind: 'order.changed', orderId: order.id, ownerId: order.owner_id });
      } finally {
        off();
      }
    });

    it('a refused change leaves no event behind (the transaction rolls back)', async () => {
      const order = await fresh();
      await act(order.id, 'refund');
      expect(await eventTypes(order.id)).toEqual(['order.created']);
    });
  });
});
