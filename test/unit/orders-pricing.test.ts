import { describe, expect, it } from 'vitest';
import { type Coupon, discountFor, normaliseCouponCode } from '../../src/domain/coupons.js';
import { DomainError } from '../../src/domain/errors.js';
import { checkIdempotencyKey, fingerprint } from '../../src/domain/idempotency.js';
import { checkCreateInput, checkUpdateInput } from '../../src/domain/order-input.js';
import { MAX_AMOUNT_CENTS } from '../../src/domain/order-model.js';
import { computeTotals } from '../../src/domain/order-pricing.js';
import { decimalAmount } from '../../src/http/rest/orders/versions.js';

const coupon = (percentOff: number | null, amountOffCents: number | null): Coupon => ({
  code: 'X',
  percentOff,
  amountOffCents,
  active: true,
  createdAt: '2026-01-01T00:00:00.000Z',
});

const details = (fn: () => void) => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as DomainError).details.map((d) => `${d.field}:${d.code}`);
  }
  return [];
};

describe('order totals', () => {
  it('sums quantity × catalogue price', () => {
    const lines = [
      { productId: 'a', quantity: 2, unitPriceCents: 1250 },
      { productId: 'b', quantity: 1, unitPriceCents: 399 },
    ];
    expect(computeTotals(lines, null)).toEqual({ subtotalCents: 2899, discountCents: 0, amountCents: 2899 });
  });

  it('rounds percentage discounts half up and never discounts below zero', () => {
    expect(discountFor(coupon(10, null), 2899)).toBe(290);
    expect(discountFor(coupon(10, null), 2895)).toBe(290); // 289.5 rounds up
    expect(discountFor(coupon(100, null), 2899)).toBe(2899);
    expect(discountFor(coupon(null, 500), 300)).toBe(300);
    expect(discountFor(null, 300)).toBe(0);
  });

  it('refuses a subtotal beyond the 32-bit amount column with a 422', () => {
    const err = (() => {
      try {
        computeTotals([{ productId: 'a', quantity: 1000, unitPriceCents: 100_000_000 }], null);
      } catch (e) {
        return e as DomainError;
      }
      return undefined;
    })();
    expect(err?.code).toBe('unprocessable');
    expect(
      computeTotals([{ productId: 'a', quantity: 1, unitPriceCents: MAX_AMOUNT_CENTS }], null).amountCents,
    ).toBe(MAX_AMOUNT_CENTS);
  });

  it('formats v1 decimal amounts without floating point', () => {
    expect(decimalAmount(0)).toBe('0.00');
    expect(decimalAmount(5)).toBe('0.05');
    expect(decimalAmount(2609)).toBe('26.09');
    expect(decimalAmount(100000)).toBe('1000.00');
    expect(decimalAmount(MAX_AMOUNT_CENTS)).toBe('21474836.47');
  });
});

describe('coupon codes', () => {
  it('are case-insensitive and limited to letters, digits, "_" and "-"', () => {
    expect(normaliseCouponCode(' tenoff ')).toBe('TENOFF');
    expect(normaliseCouponCode('spring_sale-2026')).toBe('SPRING_SALE-2026');
    expect(normaliseCouponCode('TEN OFF')).toBeNull();
    expect(normaliseCouponCode('-X')).toBeNull();
    expect(normaliseCouponCode('A'.repeat(65))).toBeNull();
  });

  it('refuse letters that upper-case onto ASCII, rather than redeem the ASCII code', () => {
    expect(normaliseCouponCode('w\u0131nter')).toBeNull(); // dotless i: WINTER
    expect(normaliseCouponCode('\u017fale')).toBeNull(); // long s: SALE
    expect(normaliseCouponCode('gro\u00df')).toBeNull(); // sharp s: GROSS
    expect(normaliseCouponCode('\ufb00')).toBeNull(); // ligature ff: FF
    expect(normaliseCouponCode('winter')).toBe('WINTER');
  });
});

describe('order input checks in the core (for every surface)', () => {
  const valid = {
    items: [{ productId: 'prd_1', quantity: 1 }],
    currency: 'USD' as const,
    shippingAddress: { name: 'A', street: 'B', city: 'C', postalCode: 'D', country: 'US' },
  };

  it('accepts a valid order', () => {
    expect(details(() => checkCreateInput(valid))).toEqual([]);
  });

  it('reports every problem at once, with neutral field paths in the core names', () => {
    const problems = details(() =>
      checkCreateInput({
        items: [
          { productId: '', quantity: 0 },
          { productId: 'p', quantity: 1001 },
        ],
        currency: 'JPY' as never,
        shippingAddress: { name: ' ', street: 'B', city: 'C', postalCode: 'x'.repeat(21), country: 'XX' },
        couponCode: 'bad code',
      }),
    );
    expect(problems).toEqual([
      'items[0].productId:range_error',
      'items[0].quantity:range_error',
      'items[1].quantity:range_error',
      'currency:invalid_enum',
      'shippingAddress.name:range_error',
      'shippingAddress.postalCode:range_error',
      'shippingAddress.country:invalid_enum',
      'couponCode:invalid_format',
    ]);
  });

  it('needs 1 to 50 items', () => {
    expect(details(() => checkCreateInput({ ...valid, items: [] }))).toEqual(['items:range_error']);
    const many = Array.from({ length: 51 }, () => ({ productId: 'p', quantity: 1 }));
    expect(details(() => checkCreateInput({ ...valid, items: many }))).toEqual(['items:range_error']);
  });

  it('an update of no field is valid (it changes nothing); bad values are refused', () => {
    expect(details(() => checkUpdateInput({}))).toEqual([]);
    expect(details(() => checkUpdateInput({ status: 'LOST' as never }))).toEqual(['status:invalid_enum']);
    expect(details(() => checkUpdateInput({ couponCode: null }))).toEqual([]);
  });
});

describe('idempotency keys', () => {
  it('accepts 1 to 255 printable ASCII characters', () => {
    expect(checkIdempotencyKey(undefined)).toBeUndefined();
    expect(checkIdempotencyKey('a')).toBe('a');
    expect(checkIdempotencyKey('k'.repeat(255))).toHaveLength(255);
    expect(checkIdempotencyKey('550e8400-e29b-41d4-a716-446655440000 retry#2')).toBeDefined();
  });

  it('refuses empty, long, non-ASCII and repeated keys', () => {
    for (const bad of ['', 'k'.repeat(256), 'ключ', 'tab\there', ['a', 'b']]) {
      expect(() => checkIdempotencyKey(bad)).toThrow(DomainError);
    }
  });

  it('fingerprints requests independently of key order, but not of values', () => {
    expect(fingerprint({ a: 1, b: [{ x: 1, y: 2 }] })).toBe(fingerprint({ b: [{ y: 2, x: 1 }], a: 1 }));
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: 2 }));
    expect(fingerprint({ a: [1, 2] })).not.toBe(fingerprint({ a: [2, 1] }));
    expect(fingerprint({ a: null })).not.toBe(fingerprint({}));
  });
});
