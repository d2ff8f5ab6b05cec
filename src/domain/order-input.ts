import type { OrderStatus } from '../store/types.js';
import { Problems } from './errors.js';
import { COUPON_CODE_RULE, normaliseCouponCode } from './coupons.js';
import { isCountryCode } from './order-countries.js';
import {
  CURRENCIES,
  type CreateOrderInput,
  MAX_ITEMS,
  MAX_QUANTITY,
  type OrderItemInput,
  type ShippingAddress,
  type UpdateOrderInput,
} from './order-model.js';
import { ORDER_STATUSES } from './order-state.js';
import { checkText, isBlank } from './validate.js';

/**
 * Field checks for order input. The REST schemas reject most of this before it arrives; the core
 * checks again because GraphQL and the seed call it too, and the rules must not depend on the door.
 * Field names in problems are neutral paths in the core's own names (`items[2].productId`,
 * `shippingAddress.postalCode`); each surface renders them (REST: `shipping_address.postal_code`).
 */
const ADDRESS_LIMITS: Array<[keyof ShippingAddress, number]> = [
  ['name', 100],
  ['street', 200],
  ['city', 100],
  ['postalCode', 20],
];

/** `prefix` is where the item sits in the body: `items[3]` in an order, empty when it is the body. */
export const fieldAt = (prefix: string, name: string): string => (prefix === '' ? name : `${prefix}.${name}`);

export function checkItem(problems: Problems, item: OrderItemInput, prefix: string): void {
  const productId = fieldAt(prefix, 'productId');
  const quantity = fieldAt(prefix, 'quantity');
  if (typeof item?.productId !== 'string' || item.productId.length < 1 || item.productId.length > 64) {
    problems.add(productId, `${productId} must be 1 to 64 characters`, 'range_error');
  }
  if (!Number.isInteger(item?.quantity) || item.quantity < 1 || item.quantity > MAX_QUANTITY) {
    problems.add(quantity, `${quantity} must be an integer from 1 to ${MAX_QUANTITY}`, 'range_error');
  }
}

function checkAddress(problems: Problems, address: ShippingAddress | undefined): void {
  if (address === undefined || address === null || typeof address !== 'object') {
    problems.add('shippingAddress', 'shippingAddress is required', 'required');
    return;
  }
  for (const [key, max] of ADDRESS_LIMITS) {
    const field = `shippingAddress.${key}`;
    const bad = checkText(address[key], 1, max);
    if (bad) problems.add(field, `${field} ${bad}`, 'range_error');
    else if (isBlank(address[key])) problems.add(field, `${field} must not be blank`, 'range_error');
  }
  if (typeof address.country !== 'string' || !isCountryCode(address.country)) {
    problems.add(
      'shippingAddress.country',
      'shippingAddress.country must be an ISO 3166-1 alpha-2 code such as US or DE',
      'invalid_enum',
    );
  }
}

function checkCoupon(problems: Problems, code: string | null | undefined): void {
  if (code === undefined || code === null) return;
  if (typeof code !== 'string' || normaliseCouponCode(code) === null) {
    problems.add('couponCode', `couponCode ${COUPON_CODE_RULE}`, 'invalid_format');
  }
}

function checkCurrency(problems: Problems, currency: unknown): void {
  if (!CURRENCIES.includes(currency as never)) {
    problems.add('currency', `currency must be one of ${CURRENCIES.join(', ')}`, 'invalid_enum');
  }
}

export function checkCreateInput(input: CreateOrderInput): void {
  const problems = new Problems();
  if (!Array.isArray(input.items) || input.items.length < 1 || input.items.length > MAX_ITEMS) {
    problems.add('items', `items must have 1 to ${MAX_ITEMS} entries`, 'range_error');
  } else {
    input.items.forEach((item, i) => checkItem(problems, item, `items[${i}]`));
  }
  checkCurrency(problems, input.currency);
  checkAddress(problems, input.shippingAddress);
  checkCoupon(problems, input.couponCode);
  problems.throwIfAny();
}

export function checkUpdateInput(input: UpdateOrderInput): void {
  // No field at all is a change that alters nothing: answered with the order as it is, nothing
  // written (the rule D19 gives user updates, kept for every resource).
  const problems = new Problems();
  if (input.currency !== undefined) checkCurrency(problems, input.currency);
  if (input.shippingAddress !== undefined) checkAddress(problems, input.shippingAddress);
  checkCoupon(problems, input.couponCode);
  if (input.status !== undefined && !ORDER_STATUSES.includes(input.status as OrderStatus)) {
    problems.add('status', `status must be one of ${ORDER_STATUSES.join(', ')}`, 'invalid_enum');
  }
  problems.throwIfAny();
}
