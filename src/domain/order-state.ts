import type { OrderStatus } from '../store/types.js';
import { conflict } from './errors.js';

/**
 * The order state machine of decisions §5. Status only moves forward one step at a time; cancel
 * leaves from PENDING or PROCESSING; refund happens once from SHIPPED or DELIVERED and keeps the
 * status. Every refusal is a 409 `conflict` so clients can tell "not now" from "not valid".
 */
export const ORDER_STATUSES: readonly OrderStatus[] = [
  'PENDING',
  'PROCESSING',
  'SHIPPED',
  'DELIVERED',
  'CANCELLED',
];

const NEXT: Partial<Record<OrderStatus, OrderStatus>> = {
  PENDING: 'PROCESSING',
  PROCESSING: 'SHIPPED',
  SHIPPED: 'DELIVERED',
};

const CANCELLABLE: readonly OrderStatus[] = ['PENDING', 'PROCESSING'];
const REFUNDABLE: readonly OrderStatus[] = ['SHIPPED', 'DELIVERED'];
/** Removing an order is allowed before fulfilment starts, or once it has been cancelled. */
const DELETABLE: readonly OrderStatus[] = ['PENDING', 'CANCELLED'];

export const nextStatus = (from: OrderStatus): OrderStatus | undefined => NEXT[from];

export function assertAdvance(from: OrderStatus, to: OrderStatus): void {
  if (NEXT[from] !== to) {
    const allowed = NEXT[from];
    throw conflict(
      allowed
        ? `An order in ${from} can only move to ${allowed}, not ${to}.`
        : `An order in ${from} cannot change status.`,
      { from, to },
    );
  }
}

export function assertCancellable(from: OrderStatus): void {
  if (!CANCELLABLE.includes(from)) {
    throw conflict(`An order in ${from} cannot be cancelled; only PENDING or PROCESSING orders can.`, {
      from,
    });
  }
}

export function assertRefundable(from: OrderStatus, alreadyRefunded: boolean): void {
  if (alreadyRefunded) throw conflict('This order has already been refunded.', { from });
  if (!REFUNDABLE.includes(from)) {
    throw conflict(`An order in ${from} cannot be refunded; only SHIPPED or DELIVERED orders can.`, {
      from,
    });
  }
}

/** Items, address, currency and coupon are editable only until fulfilment starts. */
export function assertEditable(from: OrderStatus): void {
  if (from !== 'PENDING') {
    throw conflict(`An order in ${from} can no longer be edited; only PENDING orders can.`, { from });
  }
}

export function assertDeletable(from: OrderStatus): void {
  if (!DELETABLE.includes(from)) {
    throw conflict(`An order in ${from} cannot be deleted; cancel it first if it is PROCESSING.`, {
      from,
    });
  }
}
