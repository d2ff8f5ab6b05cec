import { describe, expect, it } from 'vitest';
import {
  entityTag,
  notModified,
  parseEntityTags,
  parseHttpDate,
  preconditionHolds,
  sameSecond,
} from '../../src/domain/order-conditions.js';

describe('conditional GET helpers', () => {
  const lastModified = new Date('2026-03-04T05:06:07.890Z');
  const etag = entityTag({ id: 'ord_1', amount_cents: 100 });

  it('makes a quoted, stable tag that changes with the content', () => {
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{32}"$/);
    expect(entityTag({ id: 'ord_1', amount_cents: 100 })).toBe(etag);
    expect(entityTag({ id: 'ord_1', amount_cents: 101 })).not.toBe(etag);
  });

  it('parses tag lists, weak tags and *', () => {
    expect(parseEntityTags('"a", W/"b",   "c"')).toEqual(['a', 'b', 'c']);
    expect(parseEntityTags(' * ')).toEqual(['*']);
    expect(parseEntityTags('"with,comma", "x"')).toEqual(['with,comma', 'x']);
    expect(parseEntityTags('unquoted')).toEqual([]);
  });

  it('If-None-Match: weak comparison, lists and *', () => {
    const v = { etag, lastModified };
    expect(notModified({ ifNoneMatch: etag }, v)).toBe(true);
    expect(notModified({ ifNoneMatch: `W/${etag}` }, v)).toBe(true);
    expect(notModified({ ifNoneMatch: `"x", ${etag}` }, v)).toBe(true);
    expect(notModified({ ifNoneMatch: '*' }, v)).toBe(true);
    expect(notModified({ ifNoneMatch: '"x"' }, v)).toBe(false);
    expect(notModified({ ifNoneMatch: '' }, v)).toBe(false);
  });

  it('If-None-Match, when present, decides alone', () => {
    const v = { etag, lastModified };
    expect(notModified({ ifNoneMatch: '"x"', ifModifiedSince: 'Fri, 01 Jan 2100 00:00:00 GMT' }, v)).toBe(
      false,
    );
    expect(notModified({ ifNoneMatch: etag, ifModifiedSince: 'Thu, 01 Jan 1970 00:00:00 GMT' }, v)).toBe(
      true,
    );
  });

  it('If-Modified-Since at one-second granularity', () => {
    const v = { etag, lastModified };
    expect(notModified({ ifModifiedSince: 'Wed, 04 Mar 2026 05:06:07 GMT' }, v)).toBe(true);
    expect(notModified({ ifModifiedSince: 'Wed, 04 Mar 2026 05:06:06 GMT' }, v)).toBe(false);
    expect(notModified({ ifModifiedSince: 'Wed, 04 Mar 2026 05:06:08 GMT' }, v)).toBe(true);
    expect(notModified({ ifModifiedSince: 'not a date' }, v)).toBe(false);
    expect(notModified({}, v)).toBe(false);
  });

  it('If-Match: strong comparison, lists and *; a weak or unquoted tag never matches', () => {
    const v = { etag, lastModified };
    expect(preconditionHolds({ ifMatch: etag }, v)).toBe(true);
    expect(preconditionHolds({ ifMatch: ` * ` }, v)).toBe(true);
    expect(preconditionHolds({ ifMatch: `"x", ${etag}` }, v)).toBe(true);
    expect(preconditionHolds({ ifMatch: `"x",${etag},"y"` }, v)).toBe(true);
    expect(preconditionHolds({ ifMatch: `W/${etag}` }, v)).toBe(false);
    expect(preconditionHolds({ ifMatch: `W/"x", W/${etag}` }, v)).toBe(false);
    expect(preconditionHolds({ ifMatch: etag.replace(/"/g, '') }, v)).toBe(false);
    expect(preconditionHolds({ ifMatch: '"x"' }, v)).toBe(false);
    // A value holding no entity tag names no representation: nothing matches it.
    expect(preconditionHolds({ ifMatch: '' }, v)).toBe(false);
  });

  it('If-Match, when present, decides alone; If-Unmodified-Since is then ignored', () => {
    const v = { etag, lastModified };
    expect(preconditionHolds({ ifMatch: etag, ifUnmodifiedSince: 'Thu, 01 Jan 1970 00:00:00 GMT' }, v)).toBe(
      true,
    );
    expect(preconditionHolds({ ifMatch: '"x"', ifUnmodifiedSince: 'Fri, 01 Jan 2100 00:00:00 GMT' }, v)).toBe(
      false,
    );
  });

  it('If-Unmodified-Since at one-second granularity; an invalid date is ignored', () => {
    const v = { etag, lastModified };
    expect(preconditionHolds({ ifUnmodifiedSince: 'Wed, 04 Mar 2026 05:06:07 GMT' }, v)).toBe(true);
    expect(preconditionHolds({ ifUnmodifiedSince: 'Wed, 04 Mar 2026 05:06:08 GMT' }, v)).toBe(true);
    expect(preconditionHolds({ ifUnmodifiedSince: 'Wed, 04 Mar 2026 05:06:06 GMT' }, v)).toBe(false);
    expect(preconditionHolds({ ifUnmodifiedSince: 'Wednesday, 04-Mar-26 05:06:06 GMT' }, v)).toBe(false);
    expect(preconditionHolds({ ifUnmodifiedSince: 'not a date' }, v)).toBe(true);
    expect(preconditionHolds({}, v)).toBe(true);
  });

  it('a date naming a second in which the resource changed twice is weak (RFC 9110 §8.8.2.2)', () => {
    const v = { etag, lastModified, changedTwiceInSecond: true };
    const same = 'Wed, 04 Mar 2026 05:06:07 GMT';
    const later = 'Wed, 04 Mar 2026 05:06:08 GMT';
    // The second of Last-Modified proves nothing: 200, 412.
    expect(notModified({ ifModifiedSince: same }, v)).toBe(false);
    expect(preconditionHolds({ ifUnmodifiedSince: same }, v)).toBe(false);
    // A later second saw no change at all, an earlier one is modified anyway.
    expect(notModified({ ifModifiedSince: later }, v)).toBe(true);
    expect(preconditionHolds({ ifUnmodifiedSince: later }, v)).toBe(true);
    expect(notModified({ ifModifiedSince: 'Wed, 04 Mar 2026 05:06:06 GMT' }, v)).toBe(false);
    // Entity tags are unaffected and keep their precedence over the dates.
    expect(notModified({ ifNoneMatch: etag, ifModifiedSince: same }, v)).toBe(true);
    expect(preconditionHolds({ ifMatch: etag, ifUnmodifiedSince: same }, v)).toBe(true);
    // Changed once in that second: the date is as good as before.
    const once = { etag, lastModified, changedTwiceInSecond: false };
    expect(notModified({ ifModifiedSince: same }, once)).toBe(true);
    expect(preconditionHolds({ ifUnmodifiedSince: same }, once)).toBe(true);
  });

  it('sameSecond compares whole seconds of ISO timestamps', () => {
    expect(sameSecond('2026-03-04T05:06:07.001Z', '2026-03-04T05:06:07.999Z')).toBe(true);
    expect(sameSecond('2026-03-04T05:06:07.999Z', '2026-03-04T05:06:08.000Z')).toBe(false);
  });

  it('reads the three HTTP-date forms and refuses others', () => {
    const expected = Date.UTC(1994, 10, 6, 8, 49, 37);
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(expected);
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(expected);
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(expected);
    for (const bad of [
      '1994-11-06T08:49:37Z',
      '0',
      '',
      'Sun, 31 Feb 1994 08:49:37 GMT',
      'Sun, 06 Foo 1994 08:49:37 GMT',
    ]) {
      expect(parseHttpDate(bad), bad).toBeUndefined();
    }
  });
});
