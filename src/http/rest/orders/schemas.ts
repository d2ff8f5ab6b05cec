import { type TSchema, Type } from '@sinclair/typebox';
import { CURRENCIES, MAX_ITEMS, MAX_QUANTITY } from '../../../domain/order-model.js';
import { ORDER_STATUSES } from '../../../domain/order-state.js';
import { COUPON_CODE_PATTERN } from '../../../domain/coupons.js';
import { CursorQuery, ErrorBodySchema, LimitQuery, NOT_BLANK } from '../common-schemas.js';

export { IdempotencyHeaders } from '../common-schemas.js';

/**
 * TypeBox schemas of the order API. They validate requests and describe the API in OpenAPI, so
 * enumerations are plain `enum` keywords: a wrong value reports one `invalid_enum` detail.
 */
const enumOf = <T extends string>(values: readonly T[], description: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], description });

export const CurrencySchema = enumOf(CURRENCIES, 'ISO 4217 currency code.');
export const StatusSchema = enumOf(ORDER_STATUSES, 'Order status.');
const text = (maxLength: number, description: string) =>
  Type.String({ minLength: 1, maxLength, pattern: NOT_BLANK, description });

export const ShippingAddressSchema = Type.Object(
  {
    name: text(100, 'Recipient name.'),
    street: text(200, 'Street and number.'),
    city: text(100, 'City.'),
    postal_code: text(20, 'Postal code.'),
    country: Type.String({
      pattern: '^[A-Z]{2}$',
      description: 'ISO 3166-1 alpha-2 country code, upper case (US, DE, GB).',
      examples: ['US'],
    }),
  },
  { additionalProperties: false },
);

// No maxLength: the pattern bounds the code at 64 characters, and white space around it is trimmed
// by the core, not counted, as on GraphQL. A raw-length bound here would refuse what GraphQL accepts.
const CouponCodeSchema = Type.Unsafe<string | null>({
  type: ['string', 'null'],
  minLength: 1,
  pattern: COUPON_CODE_PATTERN,
  description: 'Coupon code, case-insensitive; null for none.',
});

export const OrderItemInputSchema = Type.Object(
  {
    product_id: Type.String({ minLength: 1, maxLength: 64, description: 'A product of the catalogue.' }),
    quantity: Type.Integer({ minimum: 1, maximum: MAX_QUANTITY, description: `1 to ${MAX_QUANTITY}.` }),
  },
  { additionalProperties: false, description: 'The price comes from the catalogue, never from the client.' },
);

export const CreateOrderRequestSchema = Type.Object(
  {
    items: Type.Array(OrderItemInputSchema, { minItems: 1, maxItems: MAX_ITEMS }),
    currency: CurrencySchema,
    shipping_address: ShippingAddressSchema,
    coupon_code: Type.Optional(CouponCodeSchema),
  },
  { additionalProperties: false, description: 'CreateOrderRequest; PUT takes the same shape.' },
);

export const PatchOrderRequestSchema = Type.Object(
  {
    currency: Type.Optional(CurrencySchema),
    shipping_address: Type.Optional(ShippingAddressSchema),
    coupon_code: Type.Optional(CouponCodeSchema),
    status: Type.Optional(StatusSchema),
  },
  {
    additionalProperties: false,
    description:
      'Owner or admin: currency, shipping_address and coupon_code while PENDING (null removes the coupon). ' +
      'status: an admin moves it forward one step; CANCELLED works like POST .../cancel. A PATCH that ' +
      'changes nothing ({} or every value as it is) answers the order as it is and writes nothing.',
  },
);

export const OrderItemV2Schema = Type.Object({
  id: Type.String(),
  product_id: Type.String(),
  quantity: Type.Integer(),
  unit_price_cents: Type.Integer(),
});

export const OrderItemV1Schema = Type.Object({
  id: Type.String(),
  product_id: Type.String(),
  quantity: Type.Integer(),
  unit_price: Type.String({ description: 'Decimal with two fraction digits.', examples: ['12.34'] }),
});

const AddressOutSchema = Type.Object({
  name: Type.String(),
  street: Type.String(),
  city: Type.String(),
  postal_code: Type.String(),
  country: Type.String(),
});

export const OrderV2Schema = Type.Object(
  {
    id: Type.String({ examples: ['ord_01jd0k3q4c7m2x9r8v6t5s4p3n'] }),
    owner_id: Type.String({ description: 'The user or client the order belongs to.' }),
    amount_cents: Type.Integer({ description: 'Total in minor units.' }),
    currency: CurrencySchema,
    status: StatusSchema,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    subtotal_cents: Type.Integer(),
    discount_cents: Type.Integer(),
    coupon_code: Type.Union([Type.String(), Type.Null()]),
    shipping_address: AddressOutSchema,
    items: Type.Array(OrderItemV2Schema),
    refunded: Type.Boolean(),
    refunded_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { description: 'Order, version 2 representation.' },
);

export const OrderV1Schema = Type.Object(
  {
    id: Type.String(),
    amount: Type.String({ description: 'Decimal with two fraction digits.', examples: ['12.34'] }),
    status: StatusSchema,
  },
  { description: 'Order, version 1 representation (deprecated).' },
);

export const OrderParams = Type.Object({ order_id: Type.String({ minLength: 1, maxLength: 64 }) });
export const ItemParams = Type.Object({
  order_id: Type.String({ minLength: 1, maxLength: 64 }),
  item_id: Type.String({ minLength: 1, maxLength: 64 }),
});
export const UserParams = Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 64 }) });

export const ListQuery = Type.Object({
  limit: Type.Optional(LimitQuery),
  cursor: Type.Optional(CursorQuery),
  status: Type.Optional(StatusSchema),
  sort: Type.Optional(
    enumOf(['created_at', '-created_at'] as const, 'Order by creation time; "-" is newest first (default).'),
  ),
});

export const ItemsListQuery = Type.Object({
  limit: Type.Optional(LimitQuery),
  cursor: Type.Optional(CursorQuery),
});

/**
 * The preconditions every write of an existing order takes (RFC 9110 §13.1.1, §13.1.4), compared
 * with the order as GET in the same version represents it. The order is written only when they hold.
 */
export const ConditionalWriteHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      description:
        'One or more entity tags from the ETag of GET on this order (same API version), or *. Strong ' +
        'comparison: a weak tag (W/"...") never matches. Answers 412 when no tag is the current one.',
    }),
  ),
  'if-unmodified-since': Type.Optional(
    Type.String({
      description:
        'An HTTP date; evaluated only without If-Match. Answers 412 when the order was modified after ' +
        'it (whole seconds) or changed twice in the second it names (a weak date; prefer If-Match); ' +
        'an unparsable date is ignored.',
    }),
  ),
});

/** Error bodies for the statuses a route adds to the standard ones. */
export function errorResponse(description: string): TSchema {
  return { ...ErrorBodySchema, description };
}

export const NoContent = Type.Null({ description: 'No body.' });

/** 412 of a conditional write whose If-Match or If-Unmodified-Since is false. */
export const preconditionFailedResponse = (): TSchema =>
  errorResponse(
    'precondition_failed: If-Match names no current entity tag of the order, or (without If-Match) the ' +
      'order was modified after If-Unmodified-Since. Nothing was changed; read the order again.',
  );

/**
 * Items and the cancel and refund actions change the order's representation, and the order's ETag
 * is the only validator the API hands out for them: their conditions are compared with the order's.
 */
export const ORDER_CONDITIONS_NOTE =
  " If-Match and If-Unmodified-Since are compared with the order's ETag and Last-Modified (GET " +
  '/orders/{order_id} in the same version): 412 when the order has changed.';

/** ETag and Last-Modified of the order a 200 answer carries, as GET gives them. */
export const ORDER_VALIDATOR_HEADERS = {
  ETag: { type: 'string', description: 'Quoted hash of this representation, for the next If-Match.' },
  'Last-Modified': { type: 'string', description: 'HTTP date of the last change.' },
};
