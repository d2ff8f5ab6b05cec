import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const CSRF_COOKIE = 'atrium_csrf';
export const CSRF_FIELD = 'csrf_token';
const COOKIE_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const COOKIE_MAX_AGE_SECONDS = 3600;

export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Signed double-submit CSRF protection. The browser gets a random, HttpOnly, SameSite=Strict
 * cookie; the form carries an HMAC of it under a server key. A cross-site form can neither read
 * the cookie nor compute the HMAC, and a cookie planted by a sibling subdomain has no matching
 * field. Requests that announce a foreign Origin or a cross-site fetch are refused outright.
 */
export class CsrfProtection {
  constructor(
    private readonly key: Buffer,
    private readonly expectedOrigin: string,
    private readonly secureCookie: boolean,
  ) {}

  /** The form token for this browser, setting the cookie when it has none yet. */
  issue(request: FastifyRequest, reply: FastifyReply): { token: string; cookie: string } {
    let cookie = readCookie(request, CSRF_COOKIE);
    if (!cookie || !COOKIE_SHAPE.test(cookie)) {
      cookie = randomBytes(32).toString('base64url');
      const attributes = ['Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${COOKIE_MAX_AGE_SECONDS}`];
      if (this.secureCookie) attributes.push('Secure');
      reply.header('Set-Cookie', `${CSRF_COOKIE}=${cookie}; ${attributes.join('; ')}`);
    }
    return { token: this.sign(cookie), cookie };
  }

  /** The cookie value when the form token matches it and the request is not cross-site. */
  verify(request: FastifyRequest, field: string | undefined): string | undefined {
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== this.expectedOrigin) return undefined;
    if (request.headers['sec-fetch-site'] === 'cross-site') return undefined;
    const cookie = readCookie(request, CSRF_COOKIE);
    if (!cookie || !COOKIE_SHAPE.test(cookie) || field === undefined) return undefined;
    const expected = Buffer.from(this.sign(cookie));
    const presented = Buffer.from(field);
    return expected.length === presented.length && timingSafeEqual(expected, presented) ? cookie : undefined;
  }

  private sign(cookie: string): string {
    return createHmac('sha256', this.key).update(`csrf:${cookie}`).digest('base64url');
  }
}
