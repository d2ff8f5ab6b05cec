import type { EventType } from './event-types.js';

/**
 * Sample `data` for `send-test`. Shaped like the real events of the type (the order and user
 * objects the core writes), marked `test: true` and with ids no real record has.
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
    return { test: true, object: { id: userId }, changed: [] };
  }
  const status = type === 'order.cancelled' ? 'CANCELLED' : 'PENDING';
  return {
    test: true,
    id: 'ord_test',
    owner_id: userId,
    amount_cents: 4200,
    currency: 'USD',
    status,
    created_at: at,
    updated_at: at,
  };
}
