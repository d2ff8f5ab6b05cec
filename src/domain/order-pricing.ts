import { isId } from './ids.js';
import type { Db } from '../store/store.js';
import type { Tx } from './context.js';
import { type Coupon, discountFor } from './coupons.js';
import { DomainError, Problems } from './errors.js';
import { fieldAt } from './order-input.js';
import { MAX_AMOUNT_CENTS, type OrderItemInput } from './order-model.js';

/** A line with its price taken from the catalogue at the moment it was added. */
export interface PricedLine {
  productId: string;
  quantity: number;
  unitPriceCents: number;
}

export interface Totals {
  subtotalCents: number;
  discountCents: number;
  amountCents: number;
}

/**
 * Looks every product up in the catalogue. Prices come only from there; an unknown or withdrawn
 * product is a 422 naming each offending line, so a client can fix them all at once.
 */
export async function priceLines(
  db: Db | Tx['db'],
  items: readonly OrderItemInput[],
  prefix: (index: number) => string = (i) => `items[${i}]`,
): Promise<PricedLine[]> {
  const ids = [...new Set(items.map((i) => i.productId))].filter((id) => isId(id, 'prd'));
  const rows =
    ids.length === 0
      ? []
      : await db
          .selectFrom('products')
          .select(['id', 'price_cents', 'active'])
          .where('id', 'in', ids)
          .execute();
  const byId = new Map(rows.map((r) => [r.id, r]));
  const problems = new Problems();
  items.forEach((item, i) => {
    const product = byId.get(item.productId);
    if (!product) {
      problems.add(
        fieldAt(prefix(i), 'productId'),
        `product ${item.productId} does not exist`,
        'unknown_product',
      );
    } else if (product.active !== 1) {
      problems.add(
        fieldAt(prefix(i), 'productId'),
        `product ${item.productId} is no longer sold`,
        'product_unavailable',
      );
    }
  });
  problems.throwIfAny('Some order items refer to products that cannot be ordered.', 'unprocessable');
  return items.map((item) => ({
    productId: item.productId,
    quantity: item.quantity,
    unitPriceCents: byId.get(item.productId)!.price_cents,
  }));
}

export function computeTotals(lines: readonly PricedLine[], coupon: Coupon | null): Totals {
  const subtotalCents = lines.reduce((sum, l) => sum + l.quantity * l.unitPriceCents, 0);
  if (subtotalCents > MAX_AMOUNT_CENTS) {
    throw new DomainError('unprocessable', 'The order total is larger than an order may be.', [
      {
        field: 'items',
        message: `the subtotal of ${subtotalCents} cents exceeds the maximum of ${MAX_AMOUNT_CENTS}`,
        code: 'range_error',
      },
    ]);
  }
  const discountCents = discountFor(coupon, subtotalCents);
  return { subtotalCents, discountCents, amountCents: subtotalCents - discountCents };
}
