import { createHash } from 'node:crypto';

/**
 * Conditional GET per RFC 9110 §13: If-None-Match is evaluated first (weak comparison, `*`, lists)
 * and, when present, If-Modified-Since is ignored; dates compare at one-second granularity because
 * HTTP dates carry no fractions.
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

export interface Validators {
  etag: string;
  lastModified: Date;
}

export interface ConditionalHeaders {
  ifNoneMatch?: string | undefined;
  ifModifiedSince?: string | undefined;
}

/** True when the client's copy is current and the answer is 304 Not Modified. */
export function notModified(request: ConditionalHeaders, current: Validators): boolean {
  if (request.ifNoneMatch !== undefined) {
    const tags = parseEntityTags(request.ifNoneMatch);
    return tags.includes('*') || tags.includes(opaque(current.etag));
  }
  if (request.ifModifiedSince !== undefined) {
    const since = parseHttpDate(request.ifModifiedSince);
    // An invalid date is ignored, as if the header were absent.
    if (since === undefined) return false;
    return Math.floor(current.lastModified.getTime() / 1000) <= Math.floor(since / 1000);
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
