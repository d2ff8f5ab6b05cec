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
 * CSRF protection for the login and consent forms, in two layers:
 *
 * 1. Fetch metadata: a request that announces a foreign `Origin`, or `Sec-Fetch-Site` other than
 *    same-origin, is refused outright. Every current browser sends one of the two on a form POST.
 *    The pages use `Referrer-Policy: same-origin` so that the browser names the real origin on the
 *    form's POST: under `no-referrer` it sends `Origin: null` (Fetch, "serializing a request
 *    origin"), which once made every real sign-in fail here.
 * 2. Signed double-submit token: the browser gets a random, HttpOnly, SameSite=Lax cookie and
 *    the form carries an HMAC of it under a server key. A cross-site page can neither read the
 *    cookie nor compute the HMAC, and a cookie planted by a sibling subdomain has no matching field.
 *    Lax, not Strict: every flow starts with a navigation from the client's site, and a Strict
 *    cookie is not sent on it, so each new sign-in tab was given a new cookie and the forms of the
 *    tabs before it failed (until 2026-11-28). Lax sends it on that GET only; a cross-site POST
 *    still comes without it, and the fetch-metadata layer refuses it first anyway.
 *
 * A request with no browser traits at all (no Origin, no Sec-Fetch-Site, no cookie) is a
 * non-browser client posting the form directly (decisions §4 describes exactly that post). CSRF
 * needs a victim's browser, and a browser cannot be made to send a cross-site POST without those
 * traits, so such a request is let through, as the Fetch Metadata resource-isolation policy does.
 * The code it earns is still bound to the client's PKCE challenge.
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
      const attributes = ['Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${COOKIE_MAX_AGE_SECONDS}`];
      if (this.secureCookie) attributes.push('Secure');
      reply.header('Set-Cookie', `${CSRF_COOKIE}=${cookie}; ${attributes.join('; ')}`);
    }
    return { token: this.sign(cookie), cookie };
  }

  /** Whether the post may proceed (CsrfOutcome). */
  verify(request: FastifyRequest, field: string | undefined): CsrfOutcome {
    const origin = header(request, 'origin');
    const site = header(request, 'sec-fetch-site');
    // `Origin: null` is what a browser sends when a referrer policy hides the origin (a user's
    // privacy setting or extension); Sec-Fetch-Site, which no page can set, then speaks for it.
    const vouched = origin === 'null' && site === 'same-origin';
    if (origin !== undefined && origin !== this.expectedOrigin && !vouched) {
      // Our own page, opened under another name for this server (localhost for 127.0.0.1): the
      // post is same-origin to the browser, but not to AUTH_URL, which the check must hold to.
      const ownPage = site === 'same-origin' && hostOf(origin) === header(request, 'host');
      return { ok: false, reason: ownPage ? 'other_address' : 'refused' };
    }
    if (site !== undefined && site !== 'same-origin' && site !== 'none')
      return { ok: false, reason: 'refused' };
    const cookie = readCookie(request, CSRF_COOKIE);
    if (origin === undefined && site === undefined && cookie === undefined) return { ok: true, cookie: '' };
    if (!cookie || !COOKIE_SHAPE.test(cookie) || field === undefined) return { ok: false, reason: 'refused' };
    const expected = Buffer.from(this.sign(cookie));
    const presented = Buffer.from(field);
    const same = expected.length === presented.length && timingSafeEqual(expected, presented);
    return same ? { ok: true, cookie } : { ok: false, reason: 'refused' };
  }

  private sign(cookie: string): string {
    return createHmac('sha256', this.key).update(`csrf:${cookie}`).digest('base64url');
  }
}

/**
 * `ok` with the browser's CSRF cookie ('' for a non-browser client), to which the login ticket is
 * then bound; or why not: `other_address` when the form is this server's own page opened at
 * another address than AUTH_URL, `refused` for anything else (another site, an expired form).
 */
export type CsrfOutcome = { ok: true; cookie: string } | { ok: false; reason: 'other_address' | 'refused' };

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
