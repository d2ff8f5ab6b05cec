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
