import { createHash } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../../domain/clock.js';
import { unixSeconds } from '../../domain/clock.js';

const TICKET_TYP = 'authz-ticket+jwt';
const TICKET_TTL_SECONDS = 600;

/**
 * Carries "this browser signed in as this user for this very request" from the login page to the
 * consent page, so the password never travels twice. It is bound to the authorization request
 * and to the browser's CSRF cookie, lives ten minutes, and is signed with a key of its own (a
 * different `typ` and audience, so it can never pass for an access token).
 */
export class LoginTickets {
  constructor(
    private readonly key: Uint8Array,
    private readonly clock: Clock,
    private readonly audience: string,
  ) {}

  async issue(input: { userId: string; requestBinding: string; csrfCookie: string }): Promise<string> {
    const now = unixSeconds(this.clock.now());
    return new SignJWT({ req: input.requestBinding, csrf: digest(input.csrfCookie) })
      .setProtectedHeader({ alg: 'HS256', typ: TICKET_TYP })
      .setSubject(input.userId)
      .setAudience(this.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + TICKET_TTL_SECONDS)
      .sign(this.key);
  }

  /** The user id, or undefined for a ticket that is invalid, expired or made for something else. */
  async verify(
    ticket: string,
    input: { requestBinding: string; csrfCookie: string },
  ): Promise<string | undefined> {
    try {
      const { payload } = await jwtVerify(ticket, this.key, {
        algorithms: ['HS256'],
        typ: TICKET_TYP,
        audience: this.audience,
        requiredClaims: ['sub', 'exp'],
        currentDate: this.clock.now(),
      });
      if (payload.req !== input.requestBinding || payload.csrf !== digest(input.csrfCookie)) return undefined;
      return payload.sub;
    } catch (err) {
      if (err instanceof errors.JOSEError) return undefined;
      throw err;
    }
  }
}

/** A digest of the values that make an authorization request what it is. */
export function requestBinding(values: (string | undefined)[]): string {
  return digest(JSON.stringify(values));
}

function digest(s: string): string {
  return createHash('sha256').update(s).digest('base64url');
}
