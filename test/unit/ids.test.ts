import { describe, expect, it } from 'vitest';
import { ID_PREFIXES, idAt, idTime, isId, newId } from '../../src/domain/ids.js';

const SHAPE = /^[a-z]{3}_[0-9a-hjkmnp-tv-z]{26}$/;

describe('ids', () => {
  it('carries the prefix and the fixed shape for every prefix', () => {
    for (const prefix of ID_PREFIXES) {
      const id = newId(prefix);
      expect(id.startsWith(`${prefix}_`)).toBe(true);
      expect(id).toMatch(SHAPE);
      expect(isId(id)).toBe(true);
      expect(isId(id, prefix)).toBe(true);
    }
  });

  it('tells ids from other strings and prefixes apart', () => {
    const id = newId('ord');
    expect(isId(id, 'usr')).toBe(false);
    for (const bad of [
      '',
      'ord_',
      'ord_123',
      `${id}x`,
      id.toUpperCase(),
      id.replace(/.$/, 'u'),
      'ORD_' + id.slice(4),
    ]) {
      expect(isId(bad), bad).toBe(false);
    }
  });

  it('sorts by creation time: a later millisecond gives a greater id', () => {
    const base = Date.now() + 10_000;
    const a = newId('pst', base);
    const b = newId('pst', base + 1);
    const c = newId('pst', base + 60_000);
    expect([c, a, b].sort()).toEqual([a, b, c]);
    expect(idTime(a)).toBe(base);
    expect(idTime(c)).toBe(base + 60_000);
  });

  it('keeps increasing within one millisecond and when the clock steps back', () => {
    const ms = Date.now() + 20_000;
    const ids = Array.from({ length: 1000 }, () => newId('cmt', ms));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    const afterStepBack = newId('cmt', ms - 5_000);
    expect(afterStepBack > ids.at(-1)!).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('idAt encodes exactly the given past instant, outside the monotonic sequence', () => {
    newId('ord', Date.now() + 30_000);
    const past = Date.parse('2024-02-29T12:34:56.789Z');
    const id = idAt('ord', past);
    expect(id).toMatch(SHAPE);
    expect(idTime(id)).toBe(past);
    expect(idTime(newId('ord', past))).not.toBe(past);
    const many = Array.from({ length: 1000 }, () => idAt('ord', past));
    expect(new Set(many).size).toBe(1000);
  });
});
