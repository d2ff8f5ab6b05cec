import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../../src/domain/passwords.js';

describe('passwords', () => {
  it('hashes with scrypt in a self-describing format, salted', async () => {
    const a = await hashPassword('correct horse battery staple');
    const b = await hashPassword('correct horse battery staple');
    expect(a).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct');
  });

  it('verifies the right password and refuses a wrong one', async () => {
    const hash = await hashPassword('correct horse battery staple');
    expect(await verifyPassword('correct horse battery staple', hash)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', hash)).toBe(false);
    expect(await verifyPassword('Correct horse battery staple', hash)).toBe(false);
    expect(await verifyPassword('', hash)).toBe(false);
  });

  it('handles non-ASCII passwords', async () => {
    const hash = await hashPassword('pässwörd 🔑 密码');
    expect(await verifyPassword('pässwörd 🔑 密码', hash)).toBe(true);
    expect(await verifyPassword('passwort 🔑 密码', hash)).toBe(false);
  });

  it('answers false, without throwing, for a missing user and for malformed stored hashes', async () => {
    const hash = await hashPassword('correct horse battery staple');
    const [, , , , salt, key] = hash.split('$');
    const malformed = [
      '',
      'plaintext',
      'bcrypt$2b$10$abc$def$ghi',
      'scrypt$32768$8$1$',
      `scrypt$32768$8$1$${salt}$`, // an empty key would otherwise match every password
      'scrypt$32768$8$1$$',
      `scrypt$abc$8$1$${salt}$${key}`,
      `scrypt$1000$8$1$${salt}$${key}`, // N not a power of two
      `scrypt$1073741824$8$1$${salt}$${key}`, // cost far beyond what we ever write
      `scrypt$32768$0$1$${salt}$${key}`,
      `${hash}$extra`,
      hash.slice(0, -25), // a key cut below 16 bytes
    ];
    for (const stored of malformed) {
      expect(await verifyPassword('correct horse battery staple', stored), stored).toBe(false);
    }
    expect(await verifyPassword('anything', null)).toBe(false);
    expect(await verifyPassword('anything', undefined)).toBe(false);
  });
});
