import { describe, expect, it } from 'vitest';
import {
  checkEmail,
  checkText,
  HANDLE,
  joinName,
  normaliseEmail,
  parseIsoDateTime,
  splitName,
} from '../../src/domain/validate.js';

describe('checkEmail', () => {
  it('accepts ordinary addresses', () => {
    for (const ok of [
      'a@b.co',
      'first.last+tag@example.com',
      'x_y-z@sub.domain.example',
      'UPPER@EXAMPLE.COM',
    ]) {
      expect(checkEmail(ok), ok).toBeNull();
    }
  });

  it('refuses malformed addresses, over-long ones and non-strings', () => {
    const bad = [
      '',
      'plain',
      '@example.com',
      'a@',
      'a@b',
      'a b@example.com',
      'a@-example.com',
      'a@example-.com',
      'a@@b.com',
      '"q"@b.com',
      'a@b..com',
    ];
    for (const value of bad) expect(checkEmail(value), value).toBe('must be a valid email address');
    expect(checkEmail(`${'a'.repeat(250)}@b.co`)).toBe('must be a valid email address');
    // Half a character in the local part: the pattern reads UTF-16 units, so it is checked apart.
    expect(checkEmail('a\ud800@example.com')).toBe('must be a valid email address');
    expect(checkEmail('\ud83d\ude00@example.com')).toBeNull();
    // Invisible format characters (Cf) would make an address that shows as another one.
    for (const invisible of [
      '\u200b',
      '\u200d',
      '\u200e',
      '\u202e',
      '\u2060',
      '\ufeff',
      '\u00ad',
      '\u{e0041}',
    ])
      expect(checkEmail(`ad${invisible}min@example.com`), JSON.stringify(invisible)).toBe(
        'must be a valid email address',
      );
    expect(checkEmail(42)).toBe('must be a string');
    expect(checkEmail(null)).toBe('must be a string');
  });
});

describe('HANDLE', () => {
  it('allows 3 to 39 lower-case letters, digits, "_" and "-", starting with a letter or digit', () => {
    for (const ok of ['abc', 'ada_lovelace', 'x-1', '9lives', 'a'.repeat(39)])
      expect(HANDLE.test(ok), ok).toBe(true);
    for (const bad of ['ab', 'a'.repeat(40), '_ada', '-ada', 'Ada', 'ada lovelace', 'ada.l', 'ädä', '']) {
      expect(HANDLE.test(bad), bad).toBe(false);
    }
  });
});

describe('normaliseEmail', () => {
  it('stores one spelling: trimmed, lower case, composed (NFC)', () => {
    expect(normaliseEmail(' Jose\u0301@Example.COM ')).toBe('jos\u00e9@example.com');
    expect(normaliseEmail('jos\u00e9@example.com')).toBe('jos\u00e9@example.com');
  });
});

describe('checkText', () => {
  it('counts characters, not UTF-16 units', () => {
    expect(checkText('🙂🙂🙂', 1, 3)).toBeNull();
    expect(checkText('🙂🙂🙂🙂', 1, 3)).toBe('must be 1 to 3 characters');
  });

  it('enforces both bounds and the type', () => {
    expect(checkText('', 1, 5)).toBe('must be 1 to 5 characters');
    expect(checkText('abcdef', 1, 5)).toBe('must be 1 to 5 characters');
    expect(checkText('abcde', 1, 5)).toBeNull();
    expect(checkText(undefined, 1, 5)).toBe('must be a string');
    expect(checkText(['a'], 1, 5)).toBe('must be a string');
  });

  it('refuses blank text: white space and invisible format characters only', () => {
    for (const text of ['   ', '\u200b', '\ufeff\u00a0', '\u200e\u3000']) {
      expect(checkText(text, 1, 5), JSON.stringify(text)).toBe('must not be blank');
    }
    expect(checkText('a\u200b', 1, 5)).toBeNull();
    expect(checkText('', 0, 5)).toBeNull();
  });

  it('refuses half a character (an unpaired surrogate) wherever it stands', () => {
    for (const text of ['a\ud800', '\udc00b', 'x\ud83dy']) {
      expect(checkText(text, 1, 5), JSON.stringify(text)).toBe('must be well-formed Unicode text');
    }
  });

  it('refuses control characters but keeps tabs and line breaks', () => {
    expect(checkText('a\u0000b', 1, 10)).toBe('must not contain control characters');
    expect(checkText('a\u001bb', 1, 10)).toBe('must not contain control characters');
    expect(checkText('line\nbreak\r\n\tindent', 1, 30)).toBeNull();
  });
});

describe('names', () => {
  it('splits a display name at the first space and joins it back', () => {
    expect(splitName('Ada King Lovelace')).toEqual({ firstName: 'Ada', lastName: 'King Lovelace' });
    expect(splitName('  Grace   Hopper ')).toEqual({ firstName: 'Grace', lastName: 'Hopper' });
    expect(splitName('Plato')).toEqual({ firstName: 'Plato', lastName: null });
    expect(splitName('   ')).toEqual({ firstName: null, lastName: null });
    expect(joinName('Ada', 'King Lovelace')).toBe('Ada King Lovelace');
    expect(joinName('Plato', null)).toBe('Plato');
    expect(joinName(null, '')).toBe('');
  });
});

describe('parseIsoDateTime', () => {
  it('reads ISO 8601 date-times with a zone, leap days of leap years included', () => {
    expect(parseIsoDateTime('2026-11-01T09:30:00.000Z')).toBe(Date.UTC(2026, 10, 1, 9, 30));
    expect(parseIsoDateTime('2026-01-02T03:04:05+02:00')).toBe(Date.UTC(2026, 0, 2, 1, 4, 5));
    expect(parseIsoDateTime('2024-02-29T00:00Z')).toBe(Date.UTC(2024, 1, 29));
    expect(parseIsoDateTime('2000-02-29T23:59:59Z')).toBe(Date.UTC(2000, 1, 29, 23, 59, 59));
  });

  it('refuses dates and times that do not exist instead of rolling them over', () => {
    for (const bad of [
      '2026-02-30T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '1900-02-29T00:00:00Z',
      '2026-13-45T00:00:00Z',
      '2026-00-10T00:00:00Z',
      '2026-01-00T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T23:60:00Z',
      '2026-01-01T23:59:60Z',
      '2026-01-01T00:00:00+24:00',
      '2026-01-01T00:00:00+01:60',
    ]) {
      expect(parseIsoDateTime(bad), bad).toBe('not_real');
    }
  });

  it('refuses other shapes', () => {
    for (const bad of ['yesterday', '2026-01-02T03:04:05', '2026-01-02', '', '2026-1-2T00:00Z']) {
      expect(parseIsoDateTime(bad), bad).toBe('not_iso');
    }
  });
});
