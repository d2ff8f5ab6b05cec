import type { Static } from '@sinclair/typebox';
import type { CreateOrderInput, ShippingAddress, UpdateOrderInput } from '../../../domain/order-model.js';
import type {
  CreateOrderRequestSchema,
  OrderItemInputSchema,
  PatchOrderRequestSchema,
  ShippingAddressSchema,
} from './schemas.js';

/** Wire bodies (snake_case) to core input (camelCase). */
type WireAddress = Static<typeof ShippingAddressSchema>;

const address = (a: WireAddress): ShippingAddress => ({
  name: a.name,
  street: a.street,
  city: a.city,
  postalCode: a.postal_code,
  country: a.country,
});

export const itemInput = (i: Static<typeof OrderItemInputSchema>) => ({
  productId: i.product_id,
  quantity: i.quantity,
});

export function createInput(body: Static<typeof CreateOrderRequestSchema>): CreateOrderInput {
  return {
    items: body.items.map(itemInput),
    currency: body.currency,
    shippingAddress: address(body.shipping_address),
    couponCode: body.coupon_code ?? null,
  };
}

export function patchInput(body: Static<typeof PatchOrderRequestSchema>): UpdateOrderInput {
  return {
    currency: body.currency,
    shippingAddress: body.shipping_address ? address(body.shipping_address) : undefined,
    couponCode: body.coupon_code,
    status: body.status,
  };
}
