import { describe, expect, it } from 'vitest';
import { BMP_FORMAT_CHARACTERS, NOT_BLANK } from '../../src/http/rest/common-schemas.js';
import { isBlank } from '../../src/domain/validate.js';

/**
 * The REST schemas' "not blank" pattern is published in /openapi.json, where clients generated in
 * other languages compile it with their own regex engines: it must not need ECMAScript's `u` flag
 * (`\p{Cf}` does, and Python's `re` refuses it), and must still name every format character that a
 * pattern without that flag can name.
 */
describe('the not-blank pattern of the REST schemas', () => {
  it('names exactly the format characters (Cf) of the Basic Multilingual Plane', () => {
    const listed = new RegExp(`^[${BMP_FORMAT_CHARACTERS}]$`);
    const wrong: string[] = [];
    for (let c = 0; c <= 0xffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      const ch = String.fromCharCode(c);
      if (listed.test(ch) !== /\p{Cf}/u.test(ch)) wrong.push(c.toString(16));
    }
    expect(wrong).toEqual([]);
  });

  it('uses no syntax that needs the u flag: no \\p{...} classes, no \\u{...} escapes', () => {
    expect(NOT_BLANK).not.toMatch(/\\p\{|\\u\{/);
    expect(() => new RegExp(NOT_BLANK)).not.toThrow();
  });

  it('agrees with the core on blank text of the BMP, with or without the u flag', () => {
    for (const flags of ['', 'u']) {
      const notBlank = new RegExp(NOT_BLANK, flags);
      for (const text of ['   ', '\u200b\u200d', '\ufeff\u00a0', '\u00ad', '\u2066\u2069', '\u3000\t']) {
        expect(isBlank(text), JSON.stringify(text)).toBe(true);
        expect(notBlank.test(text), `${JSON.stringify(text)} /${flags}`).toBe(false);
      }
      for (const text of ['a', ' \u200bb', 'Ada']) expect(notBlank.test(text), text).toBe(true);
    }
  });
});
