import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/actor.js';
import type { Order } from '../../src/domain/order-model.js';
import { rejection, startCore, type TestCore } from './support/core.js';

describe('OrderService.firstPagesByUsers (User.orders through a data loader)', () => {
  let t: TestCore;
  let ada: Actor;
  let bob: Actor;
  let carol: Actor;
  let admin: Actor;
  const adas: Order[] = [];

  beforeAll(async () => {
    t = await startCore();
    ada = (await t.user('member')).actor;
    bob = (await t.user('member')).actor;
    carol = (await t.user('member')).actor;
    admin = (await t.user('admin')).actor;
    const product = await t.core.products.create({ name: 'Teapot', priceCents: 1500 });
    const order = (actor: Actor) =>
      t.core.orders.create(actor, {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'EUR',
        shippingAddress: { name: 'A', street: '1 Road', city: 'Paris', postalCode: '75001', country: 'FR' },
      });
    for (let i = 0; i < 4; i++) {
      t.clock.advance(1000);
      adas.push(await order(ada));
    }
    t.clock.advance(1000);
    await order(bob);
    await t.core.orders.cancel(ada, adas[0]!.id);
  });
  afterAll(async () => {
    await t.stop();
  });

  const ids = (c: { edges: { node: Order }[] }) => c.edges.map((e) => e.node.id);

  it('gives an admin the first pages of many users, newest first, with totals and items', async () => {
    const pages = await t.core.orders.firstPagesByUsers(admin, [ada.id, bob.id, carol.id, ada.id], 3);
    expect([...pages.keys()]).toEqual([ada.id, bob.id, carol.id]);
    const a = pages.get(ada.id)!;
    expect(ids(a)).toEqual([adas[3]!.id, adas[2]!.id, adas[1]!.id]);
    expect(await a.totalCount()).toBe(4);
    expect(a.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    expect(a.edges[0]!.node.items).toHaveLength(1);
    expect(await pages.get(bob.id)!.totalCount()).toBe(1);
    expect(pages.get(bob.id)!.pageInfo.hasNextPage).toBe(false);
    expect(pages.get(carol.id)).toMatchObject({ edges: [] });
    expect(await pages.get(carol.id)!.totalCount()).toBe(0);
  });

  it('continues with listForUser from the end cursor', async () => {
    const a = (await t.core.orders.firstPagesByUsers(ada, [ada.id], 2)).get(ada.id)!;
    const next = await t.core.orders.listForUser(ada, ada.id, { limit: 10, cursor: a.pageInfo.endCursor! });
    expect(next.orders.map((o) => o.id)).toEqual([adas[1]!.id, adas[0]!.id]);
  });

  it('shows a member only their own orders; others are absent, not an error', async () => {
    const pages = await t.core.orders.firstPagesByUsers(bob, [ada.id, bob.id]);
    expect([...pages.keys()]).toEqual([bob.id]);
  });

  it('filters by status, defaults to 10 and refuses more than 100', async () => {
    const cancelled = await t.core.orders.firstPagesByUsers(ada, [ada.id], undefined, 'CANCELLED');
    expect(ids(cancelled.get(ada.id)!)).toEqual([adas[0]!.id]);
    expect(await cancelled.get(ada.id)!.totalCount()).toBe(1);
    expect((await t.core.orders.firstPagesByUsers(ada, [ada.id])).get(ada.id)!.edges).toHaveLength(4);
    const err = await rejection(t.core.orders.firstPagesByUsers(ada, [ada.id], 101));
    expect(err.details[0]).toMatchObject({ field: 'first', code: 'range_error' });
    expect((await t.core.orders.firstPagesByUsers(ada, [])).size).toBe(0);
  });
});
