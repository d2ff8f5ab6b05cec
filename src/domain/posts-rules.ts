import type { Actor } from './actor.js';
import { isAdmin } from './actor.js';
import type { Tx } from './context.js';
import { DomainError, forbidden, notFound } from './errors.js';
import type { Problems } from './errors.js';
import { isId } from './ids.js';
import { checkText, isBlank, parseIsoDateTime } from './validate.js';

/**
 * Rules posts and comments share: who may write content, and the checks on the author and on
 * date-time inputs.
 */

/** Viewers are read-only; anyone else writes as themself, and an admin may write as anyone. */
export function assertMayWriteAs(actor: Actor, authorId: string): void {
  if (actor.role === 'viewer') throw forbidden('A viewer may not write content.');
  if (actor.id !== authorId && !isAdmin(actor)) throw forbidden('You may write only as yourself.');
}

/** May `actor` change or delete content written by `authorId`? */
export function assertMayChange(actor: Actor, authorId: string, what: string): void {
  if (actor.role === 'viewer') throw forbidden('A viewer may not change content.');
  if (actor.id !== authorId && !isAdmin(actor)) {
    throw forbidden(`Only the author or an admin may change this ${what}.`);
  }
}

/** The author must be a live user; an unknown one is a field problem, not a missing resource. */
export async function assertAuthorExists(tx: Tx, authorId: string): Promise<void> {
  // A string that cannot be a user id names no user, on every engine alike, without a read.
  const found = !isId(authorId, 'usr')
    ? undefined
    : await tx.db
        .selectFrom('users')
        .select('id')
        .where('id', '=', authorId)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
  if (!found) {
    throw new DomainError('validation_error', 'The author does not exist.', [
      { field: 'authorId', message: 'authorId names no user', code: 'unknown_author' },
    ]);
  }
}

/**
 * A string that cannot be a post id (ids.ts `isId`) names no post: not_found before the store is
 * asked, so every engine answers alike (PostgreSQL would refuse NUL in it). Its value is not echoed,
 * as for users: it may be long or hold control characters.
 */
export function assertPostId(id: string): void {
  if (!isId(id, 'pst')) throw notFound('Post');
}

/** Text of `min` to `max` characters that is not blank; length problems are `range_error`s. */
export function checkContent(value: unknown, field: string, max: number, problems: Problems): void {
  if (typeof value !== 'string') {
    problems.add(field, `${field} must be a string`);
    return;
  }
  if (isBlank(value)) {
    problems.add(field, `${field} must not be blank`, 'range_error');
    return;
  }
  if ([...value].length > max) {
    problems.add(field, `${field} must be 1 to ${max} characters`, 'range_error');
    return;
  }
  // With the length settled, what checkText can still object to is the characters themselves.
  const bad = checkText(value, 1, Number.MAX_SAFE_INTEGER);
  if (bad) problems.add(field, `${field} ${bad}`);
}

export function checkId(value: unknown, field: string, problems: Problems): value is string {
  if (typeof value === 'string' && value.length > 0 && value.length <= 100) return true;
  problems.add(field, `${field} must be an id`);
  return false;
}

/**
 * An ISO 8601 date-time with a zone (or a Date), as the UTC string with milliseconds that the store
 * keeps; null passes through (no date). Anything else, an impossible date such as Feb 30 included,
 * is a problem on `field`.
 */
export function readDateTime(value: unknown, field: string, problems: Problems): string | null | undefined {
  if (value === null) return null;
  const ms =
    value instanceof Date ? value.getTime() : typeof value === 'string' ? parseIsoDateTime(value) : 'not_iso';
  if (ms === 'not_real') {
    problems.add(field, `${field} is not a real date`, 'invalid_datetime');
    return undefined;
  }
  if (typeof ms !== 'number' || Number.isNaN(ms)) {
    problems.add(field, `${field} must be an ISO 8601 date-time with a time zone`, 'invalid_datetime');
    return undefined;
  }
  return new Date(ms).toISOString();
}
