import { describe, expect, it } from 'vitest';
import { checkEmail, checkText, HANDLE, joinName, splitName } from '../../src/domain/validate.js';

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
