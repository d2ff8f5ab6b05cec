import type { Actor } from './actor.js';
import { isAdmin } from './actor.js';
import { iso } from './clock.js';
import type { CoreDeps, Tx } from './context.js';
import { inGivenTransaction, inTransaction } from './context.js';
import { type Coupon, type CouponService, normaliseCouponCode } from './coupons.js';
import { conflict, DomainError, forbidden, notFound, preconditionFailed, Problems } from './errors.js';
import type { OrderStatus } from '../store/types.js';
import { checkFirst, type Connection, lazyCount, lazyEdge, pageInfoOf } from './connection.js';
import { newId } from './ids.js';
import { checkCreateInput, checkItem, checkUpdateInput } from './order-input.js';
import { liveUser } from './users.js';
import {
  type CreateOrderInput,
  type ItemPage,
  type ItemsQuery,
  type ListOrdersQuery,
  MAX_ITEMS,
  type Order,
  type OrderItem,
  type OrderItemInput,
  orderData,
  type OrderPage,
  type ReplaceOrderInput,
  type UpdateOrderInput,
} from './order-model.js';
import { computeTotals, type PricedLine, priceLines } from './order-pricing.js';
import {
  assertAdvance,
  assertCancellable,
  assertDeletable,
  assertEditable,
  assertRefundable,
} from './order-state.js';
import { sameSecond } from './order-conditions.js';
import { hydrate, insertItems, loadOrder, orderColumns, saveOrderColumns } from './order-store.js';

/** `User.orders` when `first` is omitted (the spec's other shape has `limit: Int = 10`). */
export const USER_ORDERS_PAGE_SIZE = 10;

type OrderEvent = 'order.created' | 'order.updated' | 'order.cancelled' | 'order.refunded';

/** What a mutation decided: the order as it is now and the event to record, or nothing changed. */
type Outcome = { order: Order; event: OrderEvent } | null;

/**
 * A caller's condition on the order as it is when the write runs ("still the version I read"),
 * however the surface expresses it (REST: If-Match, If-Unmodified-Since).
 */
export type OrderPrecondition = (current: Order) => boolean;

/** Options every write of an existing order takes. */
export interface OrderWriteOptions {
  /**
   * Evaluated inside the write's transaction on the order as read for the write (row-locked on
   * PostgreSQL, SQLite's single writer), after it was found and the caller authorised and before
   * any other rule: false throws `precondition_failed` and nothing is written, so no concurrent
   * writer can change the order between the check and the write.
   */
  precondition?: OrderPrecondition | undefined;
  /** The caller's transaction to write in (an idempotent request stores its answer in it), if any. */
  tx?: Tx | undefined;
}

/**
 * Orders belong to the caller's identity (a user, or a client acting for itself). Owners act on
 * their own orders; an admin may act on any. Editing is possible while PENDING; only an admin
 * moves the status forward. Every change writes its webhook event in the same transaction.
 */
export class OrderService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly coupons: CouponService,
  ) {}

  /** In the caller's transaction `given` (an idempotent request stores its answer in it), if any. */
  create(actor: Actor, input: CreateOrderInput, given?: Tx): Promise<Order> {
    return inGivenTransaction(this.deps, given, (tx) => this.createIn(tx, actor, input));
  }

  /** Creates inside a transaction the caller owns (idempotent create completes its record in it). */
  async createIn(tx: Tx, actor: Actor, input: CreateOrderInput): Promise<Order> {
    checkCreateInput(input);
    const lines = await priceLines(tx.db, input.items);
    const coupon = await this.couponFor(tx, input.couponCode ?? null, null);
    const totals = computeTotals(lines, coupon);
    const now = this.deps.clock.now();
    const at = iso(now);
    const order: Order = {
      id: newId('ord', now.getTime()),
      ownerId: actor.id,
      currency: input.currency,
      status: 'PENDING',
      ...totals,
      couponCode: coupon?.code ?? null,
      shippingAddress: trimAddress(input.shippingAddress),
      items: lines.map((l) => newItem(l, now.getTime())),
      refundedAt: null,
      createdAt: at,
      updatedAt: at,
      changedTwiceInSecond: false,
    };
    await tx.db
      .insertInto('orders')
      .values({ id: order.id, owner_id: order.ownerId, created_at: at, ...orderColumns(order) })
      .execute();
    await insertItems(tx.db, order.id, order.items, at);
    await this.announce(tx, order, 'order.created');
    return order;
  }

  async get(actor: Actor, id: string): Promise<Order> {
    const order = await loadOrder(this.deps.store.db, this.deps.store, id);
    if (!order) throw notFound('Order', id);
    authorize(actor, order);
    return order;
  }

  /** The caller's own orders. */
  list(actor: Actor, query: ListOrdersQuery): Promise<OrderPage> {
    return this.page(actor.id, query);
  }

  /** A user's orders: the user themself or an admin; anyone else is refused before anything is read. */
  async listForUser(actor: Actor, userId: string, query: ListOrdersQuery): Promise<OrderPage> {
    if (actor.id !== userId) {
      if (!isAdmin(actor)) throw forbidden('You may list only your own orders.');
      await liveUser(this.deps.store.db, this.deps.store.dialect, userId);
    }
    return this.page(userId, query);
  }

  /**
   * First pages of `User.orders` for many users at once (a data loader's batch): newest first,
   * `first` each (default 10, at most 100), optionally one status, with each user's totalCount
   * (one grouped count for the whole batch, run only if a totalCount is read).
   * Users whose orders the actor may not see (anyone but themself, unless admin) are absent from
   * the map. The cursors continue with `listForUser`.
   */
  async firstPagesByUsers(
    actor: Actor,
    userIds: readonly string[],
    first?: number | null,
    status?: OrderStatus,
  ): Promise<Map<string, Connection<Order>>> {
    const size = checkFirst(first, USER_ORDERS_PAGE_SIZE);
    const ids = [...new Set(userIds)].filter((id) => isAdmin(actor) || id === actor.id);
    const out = new Map<string, Connection<Order>>();
    if (ids.length === 0) return out;
    const db = this.deps.store.db;
    const rows = await db
      .selectFrom((eb) => {
        let inner = eb
          .selectFrom('orders')
          .selectAll()
          .select((e) =>
            e.fn
              .agg<number>('row_number', [])
              .over((ob) => ob.partitionBy('owner_id').orderBy('created_at', 'desc').orderBy('id', 'desc'))
              .as('rn'),
          )
          .where('owner_id', 'in', ids);
        if (status) inner = inner.where('status', '=', status);
        return inner.as('ranked');
      })
      .selectAll()
      .where('rn', '<=', size + 1)
      .orderBy('owner_id')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    // Counted only if a totalCount is read, then for every user of the batch at once.
    const totals = lazyCount(async () => {
      let q = db
        .selectFrom('orders')
        .select((eb) => ['owner_id', eb.fn.countAll<number>().as('n')])
        .where('owner_id', 'in', ids);
      if (status) q = q.where('status', '=', status);
      const counts = await q.groupBy('owner_id').execute();
      return new Map(counts.map((c) => [c.owner_id, Number(c.n)]));
    });
    const kept = rows.map(({ rn: _rn, ...row }) => row);
    const orders = await hydrate(db, kept);
    const byOwner = new Map<string, Order[]>();
    kept.forEach((row, i) => {
      const list = byOwner.get(row.owner_id) ?? [];
      list.push(orders[i]!);
      byOwner.set(row.owner_id, list);
    });
    for (const userId of ids) {
      const all = byOwner.get(userId) ?? [];
      const scope = `orders:${userId}:-created_at:${status ?? '*'}`;
      const edges = all
        .slice(0, size)
        .map((order) =>
          lazyEdge(order, this.deps.cursors, scope, { id: order.id, createdAt: order.createdAt }),
        );
      out.set(userId, {
        edges,
        pageInfo: pageInfoOf(edges, all.length > size, false),
        totalCount: async () => (await totals()).get(userId) ?? 0,
      });
    }
    return out;
  }

  /**
   * One page of an order's items, oldest first. Item ids grow with time, so the cursor (signed, for
   * this order's list) holds the last id sent and the next page is the items after it: an item
   * removed between pages moves nothing.
   */
  async listItems(actor: Actor, orderId: string, query: ItemsQuery): Promise<ItemPage> {
    const order = await this.get(actor, orderId);
    const scope = `items:${order.id}`;
    const after = query.cursor === undefined ? undefined : this.deps.cursors.decode(scope, query.cursor);
    const rest = after ? order.items.filter((i) => i.id > after.id) : order.items;
    const items = rest.slice(0, query.limit);
    const hasMore = rest.length > query.limit;
    const last = items[items.length - 1];
    const nextCursor =
      hasMore && last ? this.deps.cursors.encode(scope, { id: last.id, createdAt: '' }) : null;
    return { items, hasMore, nextCursor };
  }

  async getItem(actor: Actor, orderId: string, itemId: string): Promise<OrderItem> {
    const order = await this.get(actor, orderId);
    const item = order.items.find((i) => i.id === itemId);
    if (!item) throw notFound('Order item', itemId);
    return item;
  }

  async addItem(
    actor: Actor,
    orderId: string,
    input: OrderItemInput,
    options: OrderWriteOptions = {},
  ): Promise<{ order: Order; item: OrderItem }> {
    const problems = new Problems();
    checkItem(problems, input, '');
    problems.throwIfAny();
    let added: OrderItem | undefined;
    const order = await this.mutate(actor, orderId, options, async (tx, current, now) => {
      assertEditable(current.status);
      if (current.items.length >= MAX_ITEMS) {
        throw new DomainError('unprocessable', `An order holds at most ${MAX_ITEMS} items.`, [
          { field: 'items', message: `the order already has ${MAX_ITEMS} items`, code: 'range_error' },
        ]);
      }
      const [line] = await priceLines(tx.db, [input], () => '');
      added = newItem(line!, now.getTime());
      const items = [...current.items, added];
      const next = await this.repriced(tx, current, items, current.couponCode, now);
      await insertItems(tx.db, current.id, [added], iso(now));
      return { order: next, event: 'order.updated' };
    });
    return { order, item: added! };
  }

  async removeItem(
    actor: Actor,
    orderId: string,
    itemId: string,
    options: OrderWriteOptions = {},
  ): Promise<Order> {
    return this.mutate(actor, orderId, options, async (tx, current, now) => {
      if (!current.items.some((i) => i.id === itemId)) throw notFound('Order item', itemId);
      assertEditable(current.status);
      if (current.items.length === 1) {
        throw conflict('An order keeps at least one item; cancel or delete the order instead.');
      }
      const items = current.items.filter((i) => i.id !== itemId);
      const next = await this.repriced(tx, current, items, current.couponCode, now);
      await tx.db.deleteFrom('order_items').where('id', '=', itemId).execute();
      return { order: next, event: 'order.updated' };
    });
  }

  /** PATCH: address, currency and coupon while PENDING; `status` advances (admin) or cancels. */
  async update(
    actor: Actor,
    id: string,
    input: UpdateOrderInput,
    options: OrderWriteOptions = {},
  ): Promise<Order> {
    checkUpdateInput(input);
    return this.mutate(actor, id, options, async (tx, current, now) => {
      const edits =
        input.currency !== undefined || input.shippingAddress !== undefined || input.couponCode !== undefined;
      const target = input.status;
      const statusChange = target !== undefined && target !== current.status;
      if (statusChange && target !== 'CANCELLED' && !isAdmin(actor)) {
        throw forbidden('Only an admin may advance the status of an order.');
      }
      let next = current;
      if (edits) {
        assertEditable(current.status);
        next = {
          ...next,
          currency: input.currency ?? next.currency,
          shippingAddress: input.shippingAddress ? trimAddress(input.shippingAddress) : next.shippingAddress,
        };
        if (input.couponCode !== undefined)
          next = await this.repriced(tx, next, next.items, input.couponCode, now);
      }
      if (statusChange) {
        if (target === 'CANCELLED') assertCancellable(current.status);
        else assertAdvance(current.status, target);
        next = { ...next, status: target };
      }
      if (sameOrder(current, next)) return null;
      return {
        order: { ...next, updatedAt: iso(now) },
        event: target === 'CANCELLED' && statusChange ? 'order.cancelled' : 'order.updated',
      };
    });
  }

  /** PUT: replaces items, currency, address and coupon of a PENDING order; prices are looked up again. */
  async replace(
    actor: Actor,
    id: string,
    input: ReplaceOrderInput,
    options: OrderWriteOptions = {},
  ): Promise<Order> {
    checkCreateInput(input);
    return this.mutate(actor, id, options, async (tx, current, now) => {
      assertEditable(current.status);
      const lines = await priceLines(tx.db, input.items);
      const items = lines.map((l) => newItem(l, now.getTime()));
      const next = await this.repriced(
        tx,
        { ...current, currency: input.currency, shippingAddress: trimAddress(input.shippingAddress) },
        items,
        input.couponCode ?? null,
        now,
      );
      await tx.db.deleteFrom('order_items').where('order_id', '=', current.id).execute();
      await insertItems(tx.db, current.id, items, iso(now));
      return { order: next, event: 'order.updated' };
    });
  }

  /**
   * Removes a PENDING or CANCELLED order. A PENDING one is cancelled in the same transaction, so
   * webhook subscribers see `order.cancelled` and never hold a live order that silently vanished.
   */
  async delete(actor: Actor, id: string, options: OrderWriteOptions = {}): Promise<void> {
    await inTransaction(this.deps, async (tx) => {
      const current = await this.lockOwned(tx, actor, id, options);
      assertDeletable(current.status);
      if (current.status !== 'CANCELLED') {
        const now = iso(this.deps.clock.now());
        await this.announce(tx, { ...current, status: 'CANCELLED', updatedAt: now }, 'order.cancelled');
      } else {
        tx.afterCommit({ kind: 'order.changed', orderId: current.id, ownerId: current.ownerId });
      }
      await tx.db.deleteFrom('orders').where('id', '=', current.id).execute();
    });
  }

  cancel(actor: Actor, id: string, options: OrderWriteOptions = {}): Promise<Order> {
    return this.mutate(actor, id, options, async (_tx, current, now) => {
      assertCancellable(current.status);
      return { order: { ...current, status: 'CANCELLED', updatedAt: iso(now) }, event: 'order.cancelled' };
    });
  }

  /** A full refund, once, from SHIPPED or DELIVERED; the status stays as it was. */
  refund(actor: Actor, id: string, options: OrderWriteOptions = {}): Promise<Order> {
    return this.mutate(actor, id, options, async (tx, current, now) => {
      assertRefundable(current.status, current.refundedAt !== null);
      const at = iso(now);
      await tx.db
        .insertInto('refunds')
        .values({
          id: newId('ref', now.getTime()),
          order_id: current.id,
          amount_cents: current.amountCents,
          created_at: at,
        })
        .execute();
      return { order: { ...current, refundedAt: at, updatedAt: at }, event: 'order.refunded' };
    });
  }

  private async page(ownerId: string, query: ListOrdersQuery): Promise<OrderPage> {
    const sort = query.sort ?? '-created_at';
    const scope = `orders:${ownerId}:${sort}:${query.status ?? '*'}`;
    const after = query.cursor === undefined ? undefined : this.deps.cursors.decode(scope, query.cursor);
    const desc = sort === '-created_at';
    const op = desc ? '<' : '>';
    const db = this.deps.store.db;
    let q = db.selectFrom('orders').selectAll().where('owner_id', '=', ownerId);
    if (query.status) q = q.where('status', '=', query.status);
    if (after) {
      // A row comparison, not "created_at < x OR (created_at = x AND id < y)": PostgreSQL seeks the
      // (owner_id[, status], created_at, id) index straight to the cursor, so page 500 costs what
      // page 1 does; the OR form walks every newer row of the owner and filters it out.
      q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), op, eb.tuple(after.createdAt, after.id)));
    }
    const direction = desc ? 'desc' : 'asc';
    const rows = await q
      .orderBy('created_at', direction)
      .orderBy('id', direction)
      .limit(query.limit + 1)
      .execute();
    const hasMore = rows.length > query.limit;
    const orders = await hydrate(db, rows.slice(0, query.limit));
    const last = orders[orders.length - 1];
    const nextCursor =
      hasMore && last ? this.deps.cursors.encode(scope, { id: last.id, createdAt: last.createdAt }) : null;
    return { orders, hasMore, nextCursor };
  }

  /**
   * Runs a change on a locked, authorised order and records its event; null means nothing changed.
   * In the caller's transaction `options.tx`, if any.
   */
  private mutate(
    actor: Actor,
    id: string,
    options: OrderWriteOptions,
    change: (tx: Tx, current: Order, now: Date) => Promise<Outcome>,
  ): Promise<Order> {
    return inGivenTransaction(this.deps, options.tx, async (tx) => {
      const current = await this.lockOwned(tx, actor, id, options);
      const outcome = await change(tx, current, this.deps.clock.now());
      if (!outcome) return current;
      // Every change of an order comes here: it records whether it fell in the second of the one
      // before, which makes a Last-Modified naming that second weak.
      const order = {
        ...outcome.order,
        changedTwiceInSecond: sameSecond(current.updatedAt, outcome.order.updatedAt),
      };
      await saveOrderColumns(tx.db, order);
      await this.announce(tx, order, outcome.event);
      return order;
    });
  }

  /**
   * The order a write acts on, read in the write's transaction (locked on PostgreSQL): missing is
   * 404 and someone else's 403 before the caller's precondition is asked, so a condition never
   * reveals anything about an order the caller may not see.
   */
  private async lockOwned(tx: Tx, actor: Actor, id: string, options: OrderWriteOptions = {}): Promise<Order> {
    const current = await loadOrder(tx.db, this.deps.store, id, true);
    if (!current) throw notFound('Order', id);
    authorize(actor, current);
    if (options.precondition && !options.precondition(current)) {
      throw preconditionFailed(
        `Order ${id} has changed since the version this request is conditioned on; nothing was changed. ` +
          'Read it again and retry.',
      );
    }
    return current;
  }

  private async announce(tx: Tx, order: Order, event: OrderEvent): Promise<void> {
    await tx.recordEvent(event, order.ownerId, orderData(order));
    tx.afterCommit({ kind: 'order.changed', orderId: order.id, ownerId: order.ownerId });
  }

  /**
   * New totals for a new set of items or coupon. A code the order already carries keeps applying
   * even if it was deactivated since; a new code must be active.
   */
  private async repriced(
    tx: Tx,
    order: Order,
    items: OrderItem[],
    couponCode: string | null,
    now: Date,
  ): Promise<Order> {
    const coupon = await this.couponFor(tx, couponCode, order.couponCode);
    const lines: PricedLine[] = items;
    return {
      ...order,
      ...computeTotals(lines, coupon),
      couponCode: coupon?.code ?? null,
      items,
      updatedAt: iso(now),
    };
  }

  private async couponFor(tx: Tx, code: string | null, current: string | null): Promise<Coupon | null> {
    if (code === null) return null;
    if (current !== null && normaliseCouponCode(code) === current) {
      return (await this.coupons.find(tx.db, current)) ?? null;
    }
    return this.coupons.resolve(tx.db, code);
  }
}

function authorize(actor: Actor, order: Order): void {
  if (order.ownerId !== actor.id && !isAdmin(actor)) throw forbidden('This order belongs to someone else.');
}

function newItem(line: PricedLine, now: number): OrderItem {
  return {
    id: newId('itm', now),
    productId: line.productId,
    quantity: line.quantity,
    unitPriceCents: line.unitPriceCents,
  };
}

function trimAddress(a: Order['shippingAddress']): Order['shippingAddress'] {
  return {
    name: a.name.trim(),
    street: a.street.trim(),
    city: a.city.trim(),
    postalCode: a.postalCode.trim(),
    country: a.country,
  };
}

/** True when nothing a client can see changed; the timestamp alone does not count. */
function sameOrder(a: Order, b: Order): boolean {
  const visible = (o: Order) => JSON.stringify({ ...orderData(o), updated_at: '' });
  return visible(a) === visible(b);
}
