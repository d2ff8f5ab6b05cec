import { createHash } from 'node:crypto';
import type { Order } from './order-model.js';

/**
 * The conditional-request rules of an order (RFC 9110 §13), which every surface calls. GET:
 * If-None-Match is evaluated first (weak comparison, `*`, lists) and, when present,
 * If-Modified-Since is ignored. Writes: If-Match (strong comparison) and, without it,
 * If-Unmodified-Since. Dates compare at one-second granularity because HTTP dates carry no
 * fractions, and a date naming a second in which the order changed more than once is a weak
 * validator (§8.8.2.2): it never proves the client's copy current, so If-Modified-Since is not
 * 304 and If-Unmodified-Since is false. Entity tags are unaffected.
 */
export function entityTag(body: unknown): string {
  return `"${createHash('sha256').update(JSON.stringify(body)).digest('base64url').slice(0, 32)}"`;
}

/** The opaque part of each entity tag in an If-None-Match value; `*` stays `*`. */
export function parseEntityTags(header: string): string[] {
  if (header.trim() === '*') return ['*'];
  const tags: string[] = [];
  for (const match of header.matchAll(/(?:W\/)?"([^"]*)"/g)) tags.push(match[1]!);
  return tags;
}

const opaque = (etag: string) => etag.replace(/^W\//, '').replace(/^"|"$/g, '');

/** Each entity tag of an If-Match value with its weakness; `*` is handled before. */
function taggedList(header: string): { weak: boolean; opaque: string }[] {
  return [...header.matchAll(/(W\/)?"([^"]*)"/g)].map((m) => ({ weak: m[1] !== undefined, opaque: m[2]! }));
}

export interface Validators {
  etag: string;
  lastModified: Date;
  /**
   * The resource changed more than once during the second of `lastModified`, so that second,
   * presented as a date validator, may name an older version than the current one.
   */
  changedTwiceInSecond?: boolean | undefined;
}

/**
 * An order's validators in one representation of it (`body`; surfaces and versions represent it
 * differently, so their entity tags differ): its ETag, its Last-Modified and whether that date is weak.
 */
export function orderValidatorsOf(order: Order, body: unknown): Validators {
  return {
    etag: entityTag(body),
    lastModified: new Date(order.updatedAt),
    changedTwiceInSecond: order.changedTwiceInSecond,
  };
}

/** True when two ISO timestamps (or milliseconds) fall in the same whole second. */
export function sameSecond(a: string | number, b: string | number): boolean {
  const ms = (t: string | number) => (typeof t === 'number' ? t : Date.parse(t));
  return Math.floor(ms(a) / 1000) === Math.floor(ms(b) / 1000);
}

/**
 * True when the version a client dated `since` (an HTTP date, in milliseconds) is, as far as the
 * server reliably knows, the current one: the resource was not modified after that second, and it
 * did not change twice during the second itself (then the date is weak and proves nothing).
 */
function unmodifiedSince(current: Validators, since: number): boolean {
  const last = Math.floor(current.lastModified.getTime() / 1000);
  const named = Math.floor(since / 1000);
  if (last > named) return false;
  return !(last === named && current.changedTwiceInSecond === true);
}

export interface ConditionalHeaders {
  ifNoneMatch?: string | undefined;
  ifModifiedSince?: string | undefined;
}

export interface WriteConditions {
  ifMatch?: string | undefined;
  ifUnmodifiedSince?: string | undefined;
}

/**
 * The preconditions of a state-changing request (RFC 9110 §13.2.2 steps 1 and 2): true when the
 * write may go ahead, false when the answer is 412. If-Match uses the strong comparison: `*` matches
 * any current representation, a list matches when one member is the current tag, a weak tag never
 * matches, and a value that holds no entity tag matches nothing. Only without If-Match is
 * If-Unmodified-Since evaluated, at one-second granularity, false on a weak date (see above); an
 * unparsable date is ignored.
 */
export function preconditionHolds(request: WriteConditions, current: Validators): boolean {
  if (request.ifMatch !== undefined) {
    if (request.ifMatch.trim() === '*') return true;
    const tag = opaque(current.etag);
    return taggedList(request.ifMatch).some((t) => !t.weak && t.opaque === tag);
  }
  if (request.ifUnmodifiedSince !== undefined) {
    const since = parseHttpDate(request.ifUnmodifiedSince);
    if (since === undefined) return true;
    return unmodifiedSince(current, since);
  }
  return true;
}

/**
 * True when the client's copy is current and the answer is 304 Not Modified: If-None-Match when
 * present, else If-Modified-Since, never on a weak date (see above).
 */
export function notModified(request: ConditionalHeaders, current: Validators): boolean {
  if (request.ifNoneMatch !== undefined) {
    const tags = parseEntityTags(request.ifNoneMatch);
    return tags.includes('*') || tags.includes(opaque(current.etag));
  }
  if (request.ifModifiedSince !== undefined) {
    const since = parseHttpDate(request.ifModifiedSince);
    // An invalid date is ignored, as if the header were absent.
    if (since === undefined) return false;
    return unmodifiedSince(current, since);
  }
  return false;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^[A-Z][a-z]{2}, (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850 = /^[A-Z][a-z]+, (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** Milliseconds of an HTTP-date in any of the three forms RFC 9110 §5.6.7 makes recipients accept. */
export function parseHttpDate(value: string): number | undefined {
  const v = value.trim();
  let parts: [day: string, month: string, year: number, h: string, m: string, s: string] | undefined;
  let match = IMF_FIXDATE.exec(v);
  if (match) parts = [match[1]!, match[2]!, Number(match[3]), match[4]!, match[5]!, match[6]!];
  else if ((match = RFC850.exec(v))) {
    // Two-digit years: RFC 9110 says a year that looks more than 50 years ahead is in the past century.
    const yy = Number(match[3]);
    const thisYear = new Date().getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + yy;
    if (year > thisYear + 50) year -= 100;
    parts = [match[1]!, match[2]!, year, match[4]!, match[5]!, match[6]!];
  } else if ((match = ASCTIME.exec(v))) {
    parts = [match[2]!.trim(), match[1]!, Number(match[6]), match[3]!, match[4]!, match[5]!];
  }
  if (!parts) return undefined;
  const [day, month, year, h, m, s] = parts;
  const monthIndex = MONTHS.indexOf(month);
  if (monthIndex < 0) return undefined;
  const ms = Date.UTC(year, monthIndex, Number(day), Number(h), Number(m), Number(s));
  const check = new Date(ms);
  // Rejects impossible dates such as 31 Feb that Date.UTC would roll over into March.
  if (check.getUTCDate() !== Number(day) || Number(h) > 23 || Number(m) > 59 || Number(s) > 60)
    return undefined;
  return ms;
}
