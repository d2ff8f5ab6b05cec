import { isId } from './ids.js';
import { fixedQuery } from '../store/fixed-query.js';
import type { Store } from '../store/store.js';
import type { OrderItemRow, OrderRow } from '../store/types.js';
import type { Tx } from './context.js';
import type { Order, OrderItem, ShippingAddress } from './order-model.js';

/** Reading and writing order rows; the service above decides what may change. */
type Reader = Tx['db'];

interface StoredAddress {
  name: string;
  street: string;
  city: string;
  postal_code: string;
  country: string;
}

export function addressColumn(a: ShippingAddress): string {
  const stored: StoredAddress = {
    name: a.name,
    street: a.street,
    city: a.city,
    postal_code: a.postalCode,
    country: a.country,
  };
  return JSON.stringify(stored);
}

function parseAddress(column: string): ShippingAddress {
  const a = JSON.parse(column) as StoredAddress;
  return { name: a.name, street: a.street, city: a.city, postalCode: a.postal_code, country: a.country };
}

export function toItem(row: OrderItemRow): OrderItem {
  return {
    id: row.id,
    productId: row.product_id,
    quantity: row.quantity,
    unitPriceCents: row.unit_price_cents,
  };
}

export function toOrder(row: OrderRow, items: OrderItemRow[], refundedAt: string | null): Order {
  return {
    id: row.id,
    ownerId: row.owner_id,
    currency: row.currency,
    status: row.status,
    subtotalCents: row.subtotal_cents,
    discountCents: row.discount_cents,
    amountCents: row.amount_cents,
    couponCode: row.coupon_code,
    shippingAddress: parseAddress(row.shipping_address),
    items: items.map(toItem),
    refundedAt,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    changedTwiceInSecond: row.changed_twice_in_second === 1,
  };
}

/** Completes order rows with their items and refunds in two queries, whatever the page size. */
export async function hydrate(db: Reader, rows: OrderRow[]): Promise<Order[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const [items, refunds] = await Promise.all([
    db.selectFrom('order_items').selectAll().where('order_id', 'in', ids).orderBy('id', 'asc').execute(),
    db.selectFrom('refunds').select(['order_id', 'created_at']).where('order_id', 'in', ids).execute(),
  ]);
  const itemsBy = new Map<string, OrderItemRow[]>();
  for (const item of items) {
    const list = itemsBy.get(item.order_id);
    if (list) list.push(item);
    else itemsBy.set(item.order_id, [item]);
  }
  const refundedBy = new Map(refunds.map((r) => [r.order_id, r.created_at]));
  return rows.map((r) => toOrder(r, itemsBy.get(r.id) ?? [], refundedBy.get(r.id) ?? null));
}

/**
 * One order with its items and refund in a single statement (a row per item; the order's columns
 * repeat), compiled once. Three separate reads cost twice as much on SQLite, where each statement
 * opens its own read transaction, and a round trip each on PostgreSQL.
 */
const orderWithItems = fixedQuery((db, id: string) =>
  db
    .selectFrom('orders')
    .leftJoin('refunds', 'refunds.order_id', 'orders.id')
    .leftJoin('order_items', 'order_items.order_id', 'orders.id')
    .selectAll('orders')
    .select([
      'refunds.created_at as refunded_at',
      'order_items.id as item_id',
      'order_items.product_id as item_product_id',
      'order_items.quantity as item_quantity',
      'order_items.unit_price_cents as item_unit_price_cents',
    ])
    .where('orders.id', '=', id)
    .orderBy('order_items.id', 'asc'),
);

/**
 * Reads one order. With `lock`, PostgreSQL holds the row until the transaction ends, so two
 * concurrent cancels or refunds cannot both see the old state; SQLite runs one writer at a time.
 */
export async function loadOrder(
  db: Reader,
  store: Store,
  id: string,
  lock = false,
): Promise<Order | undefined> {
  // A string that is not an order id cannot match a row; PostgreSQL would refuse NUL bytes in it anyway.
  if (!isId(id, 'ord')) return undefined;
  if (lock && store.dialect === 'postgres') {
    const row = await db.selectFrom('orders').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
    if (!row) return undefined;
    const [order] = await hydrate(db, [row]);
    return order;
  }
  const rows = await orderWithItems(db, store.dialect, id);
  const first = rows[0];
  if (!first) return undefined;
  const items: OrderItem[] = [];
  for (const r of rows) {
    if (r.item_id === null) continue;
    items.push({
      id: r.item_id,
      productId: r.item_product_id!,
      quantity: r.item_quantity!,
      unitPriceCents: r.item_unit_price_cents!,
    });
  }
  return { ...toOrder(first, [], first.refunded_at), items };
}

export async function insertItems(
  db: Reader,
  orderId: string,
  items: OrderItem[],
  createdAt: string,
): Promise<void> {
  if (items.length === 0) return;
  await db
    .insertInto('order_items')
    .values(
      items.map((i) => ({
        id: i.id,
        order_id: orderId,
        product_id: i.productId,
        quantity: i.quantity,
        unit_price_cents: i.unitPriceCents,
        created_at: createdAt,
      })),
    )
    .execute();
}

/** The order's own columns that change over its life; creating and saving write the same ones. */
export function orderColumns(order: Order) {
  return {
    currency: order.currency,
    status: order.status,
    subtotal_cents: order.subtotalCents,
    discount_cents: order.discountCents,
    amount_cents: order.amountCents,
    coupon_code: order.couponCode,
    shipping_address: addressColumn(order.shippingAddress),
    updated_at: order.updatedAt,
    changed_twice_in_second: order.changedTwiceInSecond ? 1 : 0,
  };
}

/** Writes the order's own columns (not its items) as they are in `order`. */
export async function saveOrderColumns(db: Reader, order: Order): Promise<void> {
  await db.updateTable('orders').set(orderColumns(order)).where('id', '=', order.id).execute();
}
