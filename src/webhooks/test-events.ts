import { newId } from '../domain/ids.js';
import { type Order, orderData } from '../domain/order-model.js';
import { publicUserData, type User } from '../domain/users.js';
import type { EventType } from './event-types.js';

const DAY_MS = 86_400_000;

/** What a real event of each order type shows: the status the change leaves, and a refund's time. */
const ORDER_SAMPLES: Record<
  Exclude<EventType, 'user.updated' | 'payment.failed'>,
  Pick<Order, 'status'> & { refunded: boolean }
> = {
  'order.created': { status: 'PENDING', refunded: false },
  'order.updated': { status: 'PROCESSING', refunded: false },
  'order.cancelled': { status: 'CANCELLED', refunded: false },
  'order.refunded': { status: 'SHIPPED', refunded: true },
};

/** A whole, consistent order of the endpoint's owner: two items, the total their prices make. */
function sampleOrder(type: keyof typeof ORDER_SAMPLES, ownerId: string, now: Date): Order {
  const { status, refunded } = ORDER_SAMPLES[type];
  const at = now.toISOString();
  // A created order is new; the others happened to an order made earlier.
  const createdAt = type === 'order.created' ? at : new Date(now.getTime() - 3 * DAY_MS).toISOString();
  const items = [
    {
      id: newId('itm', now.getTime()),
      productId: newId('prd', now.getTime()),
      quantity: 2,
      unitPriceCents: 1250,
    },
    {
      id: newId('itm', now.getTime()),
      productId: newId('prd', now.getTime()),
      quantity: 1,
      unitPriceCents: 399,
    },
  ];
  const subtotal = items.reduce((sum, i) => sum + i.quantity * i.unitPriceCents, 0);
  return {
    id: newId('ord', now.getTime()),
    ownerId,
    currency: 'USD',
    status,
    subtotalCents: subtotal,
    discountCents: 0,
    amountCents: subtotal,
    couponCode: null,
    shippingAddress: {
      name: 'Ada Lovelace',
      street: '12 St James Square',
      city: 'London',
      postalCode: 'SW1Y 4JH',
      country: 'GB',
    },
    items,
    refundedAt: refunded ? at : null,
    createdAt,
    updatedAt: at,
    changedTwiceInSecond: false,
  };
}

/** A whole user record; its id is new, so a receiver that acts on a test event changes no real user. */
function sampleUser(now: Date): User {
  const createdAt = new Date(now.getTime() - 30 * DAY_MS).toISOString();
  return {
    id: newId('usr', now.getTime()),
    organizationId: newId('org', now.getTime()),
    handle: 'ada',
    email: 'ada@example.com',
    firstName: 'Ada',
    lastName: 'Lovelace',
    name: 'Ada Lovelace',
    role: 'member',
    emailVerifiedAt: createdAt,
    createdAt,
    updatedAt: now.toISOString(),
  };
}

/**
 * Sample `data` for `send-test`: a complete instance of the type's documented shape, made by the
 * serializers real events use (`orderData`, `publicUserData`), so a sample cannot drift from the
 * events it stands for. Marked `test: true`. Every id in it is new (no real record has it) except
 * `owner_id`, which names the endpoint's owner, to whom the event belongs.
 */
export function testEventData(type: EventType, userId: string, now: Date): Record<string, unknown> {
  const at = now.toISOString();
  if (type === 'payment.failed') {
    return {
      test: true,
      object: {
        id: 'pay_test',
        order_id: 'ord_test',
        owner_id: userId,
        amount_cents: 4200,
        currency: 'USD',
        failure_code: 'card_declined',
        failure_message: 'The card was declined.',
        created_at: at,
      },
    };
  }
  if (type === 'user.updated') {
    return { test: true, object: publicUserData(sampleUser(now)), changed: ['name'] };
  }
  return { test: true, ...orderData(sampleOrder(type, userId, now)) };
}
