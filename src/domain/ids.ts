import { randomBytes } from 'node:crypto';

/**
 * Prefixed, time-ordered identifiers: `ord_` + 10 characters of millisecond time + 16 random
 * characters, lower-case Crockford base32. Sorting ids sorts by creation time; within one
 * millisecond a process keeps them increasing, so "id descending" is "newest first".
 */
export const ID_PREFIXES = [
  'usr',
  'org',
  'pst',
  'cmt',
  'ord',
  'itm',
  'prd',
  'key',
  'whe',
  'evt',
  'cli',
  'ref',
  'rtf',
  'rtk',
  'acd',
  'dlv',
  'att',
  'sgk',
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

function freshRandom(): number[] {
  const bytes = randomBytes(16);
  return Array.from(bytes, (b) => b % 32);
}

function increment(digits: number[]): number[] {
  const next = digits.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 31) {
      next[i]! += 1;
      return next;
    }
    next[i] = 0;
  }
  return freshRandom(); // 80 bits overflowed within one millisecond: practically unreachable.
}

export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  if (now <= lastTime) {
    lastRandom = increment(lastRandom);
    now = lastTime;
  } else {
    lastTime = now;
    lastRandom = freshRandom();
  }
  return `${prefix}_${encodeTime(now)}${lastRandom.map((d) => ALPHABET[d]).join('')}`;
}

/**
 * An id that encodes exactly `ms`, for loading historical data (the demo seed). newId clamps a past
 * time to the newest it has issued, which keeps one process's ids increasing but would stamp old
 * records with today's time; bulk loaders order their own rows and rely on the 80 random bits.
 */
export function idAt(prefix: IdPrefix, ms: number): string {
  return `${prefix}_${encodeTime(ms)}${freshRandom()
    .map((d) => ALPHABET[d])
    .join('')}`;
}

/**
 * The smallest id with the given prefix that newId or idAt can issue at `ms` or later: ids sort as
 * text, so `id >= idFloor(prefix, ms)` selects the records created from `ms` on, on an index of ids.
 */
export function idFloor(prefix: IdPrefix, ms: number): string {
  return `${prefix}_${encodeTime(Math.max(0, Math.floor(ms)))}${'0'.repeat(16)}`;
}

/**
 * Event ids are the one exception to the base32 shape: the webhook spec fixes them as `evt_`
 * followed by hex. 12 hex digits of millisecond time keep them time-ordered, 20 random ones (80
 * bits) keep them unique across instances; clients deduplicate on this id.
 */
export function newEventId(now: number = Date.now()): string {
  // Monotonic within one process like newId: two events of one change (order.created, then
  // order.cancelled a millisecond later or in the same one) must sort in the order they happened.
  if (now <= lastEventTime) {
    lastEventRandom = (lastEventRandom + 1n) & EVENT_RANDOM_MASK;
    now = lastEventTime;
  } else {
    lastEventTime = now;
    lastEventRandom = BigInt(`0x${randomBytes(10).toString('hex')}`);
  }
  return `evt_${now.toString(16).padStart(12, '0')}${lastEventRandom.toString(16).padStart(20, '0')}`;
}

const EVENT_RANDOM_MASK = (1n << 80n) - 1n;
let lastEventTime = -1;
let lastEventRandom = 0n;

const ID_SHAPE = /^([a-z]{3})_[0-9a-hjkmnp-tv-z]{26}$/;

/** True when `value` has the shape of an id with the given prefix. */
export function isId(value: string, prefix?: IdPrefix): boolean {
  const m = ID_SHAPE.exec(value);
  return m !== null && (prefix === undefined || m[1] === prefix);
}

/** The creation time encoded in an id. */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let t = 0;
  for (const ch of body) t = t * 32 + ALPHABET.indexOf(ch);
  return t;
}
