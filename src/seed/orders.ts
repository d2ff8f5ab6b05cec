import type { Insertable, Kysely } from 'kysely';
import { discountFor } from '../domain/coupons.js';
import { idAt } from '../domain/ids.js';
import { sameSecond } from '../domain/order-conditions.js';
import type {
  CouponsTable,
  Database,
  OrderItemsTable,
  OrdersTable,
  OrderStatus,
  RefundsTable,
} from '../store/types.js';
import { insertRows } from './bulk.js';
import type { Random } from './random.js';
import { CITIES, STREETS } from './words.js';

/**
 * Demo orders written in bulk, bypassing the order service for speed, so this module keeps the
 * rules that service enforces: prices from the catalogue, subtotal = Σ quantity × unit price,
 * discount by the service's own coupon rule, amount = subtotal − discount, and only states the
 * machine of decisions §5 can reach (a refund only on a SHIPPED or DELIVERED order, once, for the
 * full amount, leaving the status as it was).
 */
export interface OrderOwner {
  id: string;
  name: string;
}

export interface CatalogueEntry {
  id: string;
  price_cents: number;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
export const ORDERS_PER_TRANSACTION = 5_000;

/** The order service's own discount rule, so a seeded order is priced as a created one would be. */
export function discountCents(coupon: CouponsTable | null, subtotalCents: number): number {
  if (!coupon) return 0;
  return discountFor(
    {
      code: coupon.code,
      percentOff: coupon.percent_off,
      amountOffCents: coupon.amount_off_cents,
      active: coupon.active === 1,
      createdAt: coupon.created_at,
    },
    subtotalCents,
  );
}

/** Young orders are still moving; old ones have been delivered or were cancelled early on. */
function statusForAge(r: Random, ageMs: number): OrderStatus {
  if (ageMs < 3 * DAY) {
    return r.weighted([
      ['PENDING', 45],
      ['PROCESSING', 30],
      ['SHIPPED', 12],
      ['CANCELLED', 13],
    ] as const);
  }
  if (ageMs < 14 * DAY) {
    return r.weighted([
      ['PROCESSING', 10],
      ['SHIPPED', 45],
      ['DELIVERED', 35],
      ['CANCELLED', 10],
    ] as const);
  }
  return r.weighted([
    ['DELIVERED', 90],
    ['CANCELLED', 10],
  ] as const);
}

interface Batch {
  orders: Insertable<OrdersTable>[];
  items: OrderItemsTable[];
  refunds: RefundsTable[];
}

export interface OrderPlan {
  count: number;
  /** Orders are spread over this many milliseconds before `now`. */
  spanMs: number;
  now: number;
  owners: readonly OrderOwner[];
  /** Gets a share of every order, so one demo key has a long order history to page through. */
  favouredOwner: OrderOwner;
  products: readonly CatalogueEntry[];
  /** Active coupons only: an order could not have used an inactive one. */
  coupons: readonly CouponsTable[];
}

function buildOrder(r: Random, plan: OrderPlan, createdMs: number, batch: Batch): void {
  const owner = r.chance(0.05) ? plan.favouredOwner : r.pick(plan.owners);
  const createdAt = new Date(createdMs).toISOString();
  const id = idAt('ord', createdMs);
  const lines = r.sample(
    plan.products,
    r.weighted([
      [1, 40],
      [2, 30],
      [3, 15],
      [4, 10],
      [5, 5],
    ] as const),
  );
  let subtotal = 0;
  for (const product of lines) {
    const quantity = r.weighted([
      [1, 70],
      [2, 20],
      [3, 7],
      [r.int(4, 10), 3],
    ] as const);
    subtotal += quantity * product.price_cents;
    batch.items.push({
      id: idAt('itm', createdMs),
      order_id: id,
      product_id: product.id,
      quantity,
      unit_price_cents: product.price_cents,
      created_at: createdAt,
    });
  }
  const coupon = plan.coupons.length > 0 && r.chance(0.15) ? r.pick(plan.coupons) : null;
  const discount = discountCents(coupon, subtotal);
  const age = plan.now - createdMs;
  const status = statusForAge(r, age);
  // The last change happened somewhere between creation and now; a pending order is unchanged.
  let updatedMs = status === 'PENDING' ? createdMs : createdMs + Math.floor(age * (0.2 + 0.7 * r.next()));
  // The change before the last one, if any: two in one second make the order's Last-Modified weak.
  let previousMs = status === 'PENDING' ? undefined : createdMs;
  if ((status === 'SHIPPED' || status === 'DELIVERED') && r.chance(0.04)) {
    const refundMs = updatedMs + Math.floor((plan.now - updatedMs) * r.next());
    batch.refunds.push({
      id: idAt('ref', refundMs),
      order_id: id,
      amount_cents: subtotal - discount,
      created_at: new Date(refundMs).toISOString(),
    });
    previousMs = updatedMs;
    updatedMs = refundMs;
  }
  const [city, country, currency] = r.pick(CITIES);
  batch.orders.push({
    id,
    owner_id: owner.id,
    currency,
    status,
    subtotal_cents: subtotal,
    discount_cents: discount,
    amount_cents: subtotal - discount,
    coupon_code: coupon?.code ?? null,
    shipping_address: JSON.stringify({
      name: owner.name,
      street: `${r.int(1, 240)} ${r.pick(STREETS)}`,
      city,
      postal_code: String(r.int(10000, 99999)),
      country,
    }),
    created_at: createdAt,
    updated_at: new Date(updatedMs).toISOString(),
    changed_twice_in_second: previousMs !== undefined && sameSecond(previousMs, updatedMs) ? 1 : 0,
  });
}

/**
 * Writes `plan.count` orders oldest first (so ids arrive in index order), one transaction per
 * 5,000 orders with their items and refunds, reporting after each.
 */
export async function seedOrders(
  db: Kysely<Database>,
  r: Random,
  plan: OrderPlan,
  progress: (done: number, total: number) => void,
): Promise<{ orders: number; items: number; refunds: number }> {
  const times = Array.from(
    { length: plan.count },
    () => plan.now - 60_000 - Math.floor(r.next() * plan.spanMs),
  );
  times.sort((a, b) => a - b);
  const totals = { orders: 0, items: 0, refunds: 0 };
  for (let start = 0; start < times.length; start += ORDERS_PER_TRANSACTION) {
    const batch: Batch = { orders: [], items: [], refunds: [] };
    for (const t of times.slice(start, start + ORDERS_PER_TRANSACTION)) buildOrder(r, plan, t, batch);
    await db.transaction().execute(async (trx) => {
      await insertRows(trx, 'orders', batch.orders);
      await insertRows(trx, 'order_items', batch.items);
      await insertRows(trx, 'refunds', batch.refunds);
    });
    totals.orders += batch.orders.length;
    totals.items += batch.items.length;
    totals.refunds += batch.refunds.length;
    progress(totals.orders, plan.count);
  }
  return totals;
}
