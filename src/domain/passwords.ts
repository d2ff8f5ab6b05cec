import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/** Memory-hard password hashing (scrypt, 32 MiB per hash), self-describing so parameters can change. */
const PARAMS = { N: 2 ** 15, r: 8, p: 1, keylen: 32 };

function scryptAsync(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

const maxmem = (N: number, r: number) => 128 * N * r * 2;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const { N, r, p, keylen } = PARAMS;
  const key = await scryptAsync(password, salt, keylen, { N, r, p, maxmem: maxmem(N, r) });
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/** A hash that never matches, so an unknown user costs as much time as a wrong password. */
let dummyHash: Promise<string> | undefined;

export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  const encoded = stored ?? (await (dummyHash ??= hashPassword(randomBytes(16).toString('hex'))));
  const parsed = parseHash(encoded);
  if (!parsed) return false;
  const { N, r, p, salt, expected } = parsed;
  const key = await scryptAsync(password, salt, expected.length, { N, r, p, maxmem: maxmem(N, r) });
  return timingSafeEqual(key, expected) && stored != null;
}

/**
 * A stored hash is trusted only within sane bounds: an empty key would match every password, and
 * absurd cost parameters would make scrypt throw or exhaust memory.
 */
function parseHash(encoded: string) {
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const powerOfTwo = Number.isInteger(N) && N >= 2 ** 10 && N <= 2 ** 20 && (N & (N - 1)) === 0;
  const small = (v: number, max: number) => Number.isInteger(v) && v >= 1 && v <= max;
  if (!powerOfTwo || !small(r, 32) || !small(p, 16)) return undefined;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const expected = Buffer.from(parts[5]!, 'base64url');
  if (salt.length < 8 || expected.length < 16) return undefined;
  return { N, r, p, salt, expected };
}
