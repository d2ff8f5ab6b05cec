import type { TSchema } from '@sinclair/typebox';
import { type Order, type OrderItem, orderData, orderItemData } from '../../../domain/order-model.js';
import { OrderItemV1Schema, OrderItemV2Schema, OrderV1Schema, OrderV2Schema } from './schemas.js';

/**
 * The two published versions of the order resource. Routes are written once and registered for
 * each; only the prefix and the representation differ.
 */
export interface ApiVersion {
  name: 'v1' | 'v2';
  prefix: '/api/v1' | '/api/v2';
  deprecated: boolean;
  order(order: Order): unknown;
  item(item: OrderItem): unknown;
  orderSchema: TSchema;
  itemSchema: TSchema;
}

/** Cents to a two-decimal string without floating point: 1234 -> "12.34". */
export function decimalAmount(cents: number): string {
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

export const V2: ApiVersion = {
  name: 'v2',
  prefix: '/api/v2',
  deprecated: false,
  order: orderData,
  item: orderItemData,
  orderSchema: OrderV2Schema,
  itemSchema: OrderItemV2Schema,
};

export const V1: ApiVersion = {
  name: 'v1',
  prefix: '/api/v1',
  deprecated: true,
  order: (o) => ({ id: o.id, amount: decimalAmount(o.amountCents), status: o.status }),
  item: (i) => ({
    id: i.id,
    product_id: i.productId,
    quantity: i.quantity,
    unit_price: decimalAmount(i.unitPriceCents),
  }),
  orderSchema: OrderV1Schema,
  itemSchema: OrderItemV1Schema,
};

export const VERSIONS: readonly ApiVersion[] = [V1, V2];
