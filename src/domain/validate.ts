/** Small value checks shared by the services; each returns a message or null. */
/**
 * An address every surface accepts alike (REST's request schema uses this pattern too). The local
 * part is RFC 5322's dot-atom: words without spaces, control characters or the specials that would
 * need quoting, joined by single dots, so no leading, trailing or doubled dot. The domain is
 * LDH labels with at least one dot.
 */
export const EMAIL =
  // eslint-disable-next-line no-control-regex -- control characters are excluded on purpose
  /^[^\s\u0000-\u001f\u007f@"<>(),;:\\[\].]+(?:\.[^\s\u0000-\u001f\u007f@"<>(),;:\\[\].]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
export const HANDLE = /^[a-z0-9][a-z0-9_-]{2,38}$/;

/**
 * The one spelling of an email that is stored, looked up and counted for uniqueness: trimmed, lower
 * case and in Unicode NFC, so `jösé@…` typed with combining accents is the same address.
 */
export function normaliseEmail(value: string): string {
  return value.trim().toLowerCase().normalize('NFC');
}

/**
 * Unicode's invisible format characters (Cf: zero-width space and joiners, bidi marks and
 * overrides, the soft hyphen, word joiner, byte order mark, tag characters). None belongs in an
 * address, and one would make an address that shows exactly as another user's (`ad\u200bmin@…`)
 * yet is a different address for uniqueness and login.
 */
const FORMAT_CHARACTER = /\p{Cf}/u;

export function checkEmail(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length > 254 || !EMAIL.test(value) || !isWellFormed(value) || FORMAT_CHARACTER.test(value))
    return 'must be a valid email address';
  return null;
}

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Whether text holds a C0 control character or DEL; no id, name or login of ours does. */
export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}

export function checkText(value: unknown, min: number, max: number): string | null {
  if (typeof value !== 'string') return 'must be a string';
  const length = [...value].length;
  if (length < min || length > max) return `must be ${min} to ${max} characters`;
  // eslint-disable-next-line no-control-regex -- rejecting control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/.test(value)) return 'must not contain control characters';
  if (!isWellFormed(value)) return ILL_FORMED;
  if (min > 0 && isBlank(value)) return 'must not be blank';
  return null;
}

/**
 * Whether text shows nothing: only white space and invisible format characters (zero-width space,
 * joiners, the byte order mark, bidi marks: Unicode's Cf), which `trim()` keeps as content.
 */
export function isBlank(text: string): boolean {
  return !/[^\s\p{Cf}]/u.test(text);
}

export const ILL_FORMED = 'must be well-formed Unicode text';

/**
 * Whether text is well-formed: no half character (a UTF-16 surrogate without its partner). JSON can
 * spell one with a `\ud800` escape; strict JSON readers (RFC 7493) refuse such a string and
 * PostgreSQL stores U+FFFD in its place, so no surface may let one reach the store.
 */
export function isWellFormed(text: string): boolean {
  // String.prototype.isWellFormed is in Node 20; the TypeScript lib here predates it.
  return (text as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/**
 * Where in a decoded JSON value the first ill-formed string (or key) is, as `a.b[2].c` ('' for the
 * value itself), or undefined when every string is well-formed.
 */
export function illFormedTextPath(value: unknown, at = ''): string | undefined {
  if (typeof value === 'string') return isWellFormed(value) ? undefined : at;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    const here = Array.isArray(value) ? `${at}[${key}]` : at === '' ? key : `${at}.${key}`;
    if (!isWellFormed(key)) return here;
    const found = illFormedTextPath(item, here);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Splits a display name into first and last: "Ada King Lovelace" -> ["Ada", "King Lovelace"]. */
export function splitName(name: string): { firstName: string | null; lastName: string | null } {
  const trimmed = name.trim().replace(/\s+/g, ' ');
  if (trimmed === '') return { firstName: null, lastName: null };
  const space = trimmed.indexOf(' ');
  if (space < 0) return { firstName: trimmed, lastName: null };
  return { firstName: trimmed.slice(0, space), lastName: trimmed.slice(space + 1) };
}

export function joinName(firstName: string | null, lastName: string | null): string {
  return [firstName, lastName].filter((p): p is string => p !== null && p !== '').join(' ');
}

const ISO_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/i;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * The one reader of date-time input for every surface: an ISO 8601 date-time with a zone (`Z` or
 * `+02:00`), as milliseconds since the epoch. `not_iso` when the text has another shape (no zone,
 * `yesterday`); `not_real` when it has the shape but names no real instant: a day the month does not
 * have (Feb 30, Apr 31, Feb 29 outside leap years), month 13, 24:00, second 60, an offset past 23:59.
 * `Date.parse` alone rolls Feb 30 over into March, so each part is checked before it is asked.
 */
export function parseIsoDateTime(value: string): number | 'not_iso' | 'not_real' {
  const m = ISO_DATE_TIME.exec(value);
  if (!m) return 'not_iso';
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const offsetHours = m[7] === undefined ? 0 : Number(m[7]);
  const offsetMinutes = m[8] === undefined ? 0 : Number(m[8]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return 'not_real';
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return 'not_real';
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? 'not_real' : ms;
}
