import { createHmac, randomBytes } from 'node:crypto';

/** How long the secret before a rotation keeps signing (and so keeps verifying) deliveries. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** `whsec_` + 32 random bytes in base64url. The whole string is the HMAC key, as Stripe uses it. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function signatureOf(secret: string, timestamp: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/**
 * `t=<unix>,v1=<hex>[,v1=<hex>]`: one v1 per secret still valid, newest first. Stripe's
 * `webhooks.constructEvent` accepts the header when any v1 matches, so a receiver holding either
 * the new or the old secret verifies during the overlap.
 */
export function signatureHeader(secrets: readonly string[], timestamp: number, rawBody: string): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${signatureOf(s, timestamp, rawBody)}`)].join(',');
}

/** The secrets that sign at `now`: the current one, plus the previous one inside its overlap. */
export function signingSecrets(
  endpoint: { secret: string; previous_secret: string | null; previous_secret_expires_at: string | null },
  now: Date,
): string[] {
  const secrets = [endpoint.secret];
  if (
    endpoint.previous_secret !== null &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at > now.toISOString()
  ) {
    secrets.push(endpoint.previous_secret);
  }
  return secrets;
}
