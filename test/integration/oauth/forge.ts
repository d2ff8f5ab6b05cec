import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  createSign,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';

/**
 * Hand-made JWTs for attack tests only: the server under test must refuse them, so they are
 * built byte by byte here rather than with a library that would refuse to make them.
 */
const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

export type Signer = (input: string) => string;

export function forge(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  sign: Signer,
): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${sign(input)}`;
}

export const unsigned: Signer = () => '';

/**
 * The same token with one bit of its signature flipped. Overwriting the last characters with a
 * constant (the old way) left it unchanged whenever the signature already ended in them, about
 * once in 256 runs for two characters, and the "tampered" token was then rightly accepted.
 */
export function withAlteredSignature(jwt: string): string {
  const dot = jwt.lastIndexOf('.');
  const signature = Buffer.from(jwt.slice(dot + 1), 'base64url');
  // An unsigned token has no bit to flip: returning it unchanged is the very flaw this replaces.
  if (dot < 0 || signature.length === 0) throw new Error('withAlteredSignature: the token has no signature');
  signature[0] = signature[0]! ^ 0x01;
  return `${jwt.slice(0, dot + 1)}${signature.toString('base64url')}`;
}

export function rsaSigner(key: KeyObject, algorithm = 'RSA-SHA256'): Signer {
  return (input) => createSign(algorithm).update(input).sign(key).toString('base64url');
}

export function hmacSigner(secret: string | Buffer, algorithm = 'sha256'): Signer {
  return (input) => createHmac(algorithm, secret).update(input).digest('base64url');
}

export function privateKeyFromJwk(jwk: string): KeyObject {
  return createPrivateKey({ key: JSON.parse(jwk), format: 'jwk' });
}

export function publicPemFromJwk(jwk: string): string {
  return createPublicKey({ key: JSON.parse(jwk), format: 'jwk' })
    .export({ type: 'spki', format: 'pem' })
    .toString();
}

export function strangerKey(): { privateKey: KeyObject; publicJwk: Record<string, unknown> } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKey, publicJwk: publicKey.export({ format: 'jwk' }) as Record<string, unknown> };
}
