import type { Currency, OrderStatus } from '../store/types.js';

export const CURRENCIES: readonly Currency[] = ['USD', 'EUR', 'GBP'];
export const MAX_ITEMS = 50;
export const MAX_QUANTITY = 1000;
/** The amount columns are 32-bit integers on PostgreSQL; a larger total is refused, never truncated. */
export const MAX_AMOUNT_CENTS = 2_147_483_647;

export interface ShippingAddress {
  name: string;
  street: string;
  city: string;
  postalCode: string;
  country: string;
}

export interface OrderItem {
  id: string;
  productId: string;
  quantity: number;
  unitPriceCents: number;
}

export interface Order {
  id: string;
  ownerId: string;
  currency: Currency;
  status: OrderStatus;
  subtotalCents: number;
  discountCents: number;
  amountCents: number;
  couponCode: string | null;
  shippingAddress: ShippingAddress;
  items: OrderItem[];
  refundedAt: string | null;
  createdAt: string;
  updatedAt: string;
  /**
   * The order changed more than once during the second of `updatedAt` (it counts its creation), so
   * a date validator naming that second is weak (RFC 9110 §8.8.2.2): see `order-conditions.ts`.
   */
  changedTwiceInSecond: boolean;
}

export interface OrderItemInput {
  productId: string;
  quantity: number;
}

export interface CreateOrderInput {
  items: OrderItemInput[];
  currency: Currency;
  shippingAddress: ShippingAddress;
  couponCode?: string | null | undefined;
}

/** PUT replaces everything a client controls; it has the create shape. */
export type ReplaceOrderInput = CreateOrderInput;

export interface UpdateOrderInput {
  currency?: Currency | undefined;
  shippingAddress?: ShippingAddress | undefined;
  /** null removes the coupon. */
  couponCode?: string | null | undefined;
  status?: OrderStatus | undefined;
}

export type OrderSort = 'created_at' | '-created_at';

export interface ListOrdersQuery {
  limit: number;
  cursor?: string | undefined;
  status?: OrderStatus | undefined;
  sort?: OrderSort | undefined;
}

export interface OrderPage {
  orders: Order[];
  hasMore: boolean;
  nextCursor: string | null;
}

export interface ItemsQuery {
  limit: number;
  cursor?: string | undefined;
}

export interface ItemPage {
  items: OrderItem[];
  hasMore: boolean;
  nextCursor: string | null;
}

/** An item as webhooks and the v2 REST API show it. */
export function orderItemData(item: OrderItem) {
  return {
    id: item.id,
    product_id: item.productId,
    quantity: item.quantity,
    unit_price_cents: item.unitPriceCents,
  };
}

/**
 * The v2 order object: the REST v2 body and the `data` of every order webhook event, so a
 * subscriber and an API client see one shape.
 */
export function orderData(order: Order) {
  return {
    id: order.id,
    owner_id: order.ownerId,
    amount_cents: order.amountCents,
    currency: order.currency,
    status: order.status,
    created_at: order.createdAt,
    updated_at: order.updatedAt,
    subtotal_cents: order.subtotalCents,
    discount_cents: order.discountCents,
    coupon_code: order.couponCode,
    shipping_address: {
      name: order.shippingAddress.name,
      street: order.shippingAddress.street,
      city: order.shippingAddress.city,
      postal_code: order.shippingAddress.postalCode,
      country: order.shippingAddress.country,
    },
    items: order.items.map(orderItemData),
    refunded: order.refundedAt !== null,
    refunded_at: order.refundedAt,
  };
}

export type OrderData = ReturnType<typeof orderData>;
