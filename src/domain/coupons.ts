import type { Db } from '../store/store.js';
import { isUniqueViolation } from '../store/errors.js';
import type { CouponsTable } from '../store/types.js';
import { iso } from './clock.js';
import type { CoreDeps, Tx } from './context.js';
import { DomainError, notFound, Problems, unprocessable } from './errors.js';

/**
 * Discount codes. Codes are case-insensitive (stored upper case), as shoppers type them. A coupon
 * takes either a percentage or a fixed amount of minor units off the subtotal, never below zero.
 */
export interface Coupon {
  code: string;
  percentOff: number | null;
  amountOffCents: number | null;
  active: boolean;
  createdAt: string;
}

export interface CreateCouponInput {
  code: string;
  percentOff?: number | null | undefined;
  amountOffCents?: number | null | undefined;
}

/**
 * What a code a client sends may be, as a pattern every regex dialect reads (surfaces publish it:
 * REST's schema): ASCII letters, digits, `_` and `-`, with white space around it ignored.
 */
export const COUPON_CODE_PATTERN = '^\\s*[A-Za-z0-9][A-Za-z0-9_-]{0,63}\\s*$';
export const COUPON_CODE_RULE =
  'must be 1 to 64 letters, digits, "_" or "-", starting with a letter or digit';
const CODE = new RegExp(COUPON_CODE_PATTERN);

/**
 * The stored form of a code, or null when it cannot be a code at all. The letters are checked
 * before upper-casing: Unicode's upper case maps some non-ASCII letters onto ASCII (dotless `ı`
 * and long `ſ` become `I` and `S`, `ß` becomes `SS`), which would let `wınter` redeem WINTER.
 */
export function normaliseCouponCode(code: string): string | null {
  return CODE.test(code) ? code.trim().toUpperCase() : null;
}

/** Percentages round half up to whole cents; a fixed amount never takes more than the subtotal. */
export function discountFor(coupon: Coupon | null, subtotalCents: number): number {
  if (!coupon) return 0;
  if (coupon.percentOff !== null)
    return Math.min(subtotalCents, Math.round((subtotalCents * coupon.percentOff) / 100));
  return Math.min(subtotalCents, coupon.amountOffCents ?? 0);
}

export class CouponService {
  constructor(private readonly deps: CoreDeps) {}

  async create(input: CreateCouponInput): Promise<Coupon> {
    const problems = new Problems();
    const code = typeof input.code === 'string' ? normaliseCouponCode(input.code) : null;
    if (code === null) {
      problems.add('code', `code ${COUPON_CODE_RULE}`, 'invalid_format');
    }
    const percent = input.percentOff ?? null;
    const amount = input.amountOffCents ?? null;
    if ((percent === null) === (amount === null)) {
      problems.add(null, 'Give exactly one of percent_off and amount_off_cents.', 'required');
    }
    if (percent !== null && (!Number.isInteger(percent) || percent < 1 || percent > 100)) {
      problems.add('percentOff', 'percentOff must be an integer from 1 to 100', 'range_error');
    }
    if (amount !== null && (!Number.isInteger(amount) || amount < 1 || amount > 100_000_000)) {
      problems.add('amountOffCents', 'amountOffCents must be an integer from 1 to 100000000', 'range_error');
    }
    problems.throwIfAny();
    const row: CouponsTable = {
      code: code!,
      percent_off: percent,
      amount_off_cents: amount,
      active: 1,
      created_at: iso(this.deps.clock.now()),
    };
    try {
      await this.deps.store.db.insertInto('coupons').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new DomainError('already_exists', `A coupon with code ${row.code} already exists.`, [
          { field: 'code', message: 'code is taken', code: 'taken' },
        ]);
      }
      throw err;
    }
    return toCoupon(row);
  }

  async get(code: string): Promise<Coupon> {
    const found = await this.find(this.deps.store.db, code);
    if (!found) throw notFound('Coupon', code);
    return found;
  }

  /** Stops a code from being applied to new orders and edits; orders that carry it keep their totals. */
  async deactivate(code: string): Promise<Coupon> {
    const coupon = await this.get(code);
    await this.deps.store.db
      .updateTable('coupons')
      .set({ active: 0 })
      .where('code', '=', coupon.code)
      .execute();
    return { ...coupon, active: false };
  }

  async find(db: Db | Tx['db'], code: string): Promise<Coupon | undefined> {
    const normal = normaliseCouponCode(code);
    if (normal === null) return undefined;
    const row = await db.selectFrom('coupons').selectAll().where('code', '=', normal).executeTakeFirst();
    return row ? toCoupon(row) : undefined;
  }

  /** The active coupon for a code a client sent, or the 422 the spec asks for. */
  async resolve(db: Db | Tx['db'], code: string): Promise<Coupon> {
    const coupon = await this.find(db, code);
    if (!coupon || !coupon.active) {
      throw unprocessable('couponCode', `couponCode ${code} is not an active coupon`, 'unknown_coupon');
    }
    return coupon;
  }
}

function toCoupon(row: CouponsTable): Coupon {
  return {
    code: row.code,
    percentOff: row.percent_off,
    amountOffCents: row.amount_off_cents,
    active: row.active === 1,
    createdAt: row.created_at,
  };
}
