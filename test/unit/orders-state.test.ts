import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import {
  assertAdvance,
  assertCancellable,
  assertDeletable,
  assertEditable,
  assertRefundable,
  nextStatus,
  ORDER_STATUSES,
} from '../../src/domain/order-state.js';
import type { OrderStatus } from '../../src/store/types.js';

const conflictOf = (fn: () => void): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as DomainError).code;
  }
};

describe('order state machine (decisions §5)', () => {
  const allowed: Array<[OrderStatus, OrderStatus]> = [
    ['PENDING', 'PROCESSING'],
    ['PROCESSING', 'SHIPPED'],
    ['SHIPPED', 'DELIVERED'],
  ];

  it('moves forward exactly one step, and nothing else', () => {
    for (const from of ORDER_STATUSES) {
      for (const to of ORDER_STATUSES) {
        const ok = allowed.some(([a, b]) => a === from && b === to);
        expect(
          conflictOf(() => assertAdvance(from, to)),
          `${from} -> ${to}`,
        ).toBe(ok ? undefined : 'conflict');
      }
    }
  });

  it('knows the next status', () => {
    expect(nextStatus('PENDING')).toBe('PROCESSING');
    expect(nextStatus('DELIVERED')).toBeUndefined();
    expect(nextStatus('CANCELLED')).toBeUndefined();
  });

  it('cancels only from PENDING or PROCESSING', () => {
    const ok = ORDER_STATUSES.filter((s) => conflictOf(() => assertCancellable(s)) === undefined);
    expect(ok).toEqual(['PENDING', 'PROCESSING']);
  });

  it('refunds once, only from SHIPPED or DELIVERED', () => {
    const ok = ORDER_STATUSES.filter((s) => conflictOf(() => assertRefundable(s, false)) === undefined);
    expect(ok).toEqual(['SHIPPED', 'DELIVERED']);
    for (const s of ORDER_STATUSES) expect(conflictOf(() => assertRefundable(s, true))).toBe('conflict');
  });

  it('edits only PENDING orders; deletes PENDING or CANCELLED ones', () => {
    expect(ORDER_STATUSES.filter((s) => conflictOf(() => assertEditable(s)) === undefined)).toEqual([
      'PENDING',
    ]);
    expect(ORDER_STATUSES.filter((s) => conflictOf(() => assertDeletable(s)) === undefined)).toEqual([
      'PENDING',
      'CANCELLED',
    ]);
  });
});
