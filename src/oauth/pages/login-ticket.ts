import { createHash, randomBytes } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../../domain/clock.js';
import { iso, unixSeconds } from '../../domain/clock.js';
import type { Store } from '../../store/store.js';

const TICKET_TYP = 'authz-ticket+jwt';
const TICKET_TTL_SECONDS = 600;
const TICKET_ID = /^[A-Za-z0-9_-]{22}$/;

/**
 * Carries "this browser signed in as this user for this very request" from the login page to the
 * consent page, so the password never travels twice. It is bound to the authorization request
 * and to the browser's CSRF cookie, lives ten minutes, and is signed with a key of its own (a
 * different `typ` and audience, so it can never pass for an access token).
 *
 * It is single-use: the consent post that presents it records its `jti` in `used_login_tickets`,
 * in the store every instance shares, and a ticket whose `jti` is already there is refused as an
 * expired one is. Without that, a copied consent form (fields and cookie) minted a new code per
 * post for ten minutes.
 */
export class LoginTickets {
  constructor(
    private readonly key: Uint8Array,
    private readonly clock: Clock,
    private readonly audience: string,
    private readonly store: Pick<Store, 'db'>,
  ) {}

  async issue(input: { userId: string; requestBinding: string; csrfCookie: string }): Promise<string> {
    const now = unixSeconds(this.clock.now());
    return new SignJWT({ req: input.requestBinding, csrf: digest(input.csrfCookie) })
      .setProtectedHeader({ alg: 'HS256', typ: TICKET_TYP })
      .setJti(randomBytes(16).toString('base64url'))
      .setSubject(input.userId)
      .setAudience(this.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + TICKET_TTL_SECONDS)
      .sign(this.key);
  }

  /**
   * Verifies the ticket and uses it up: the user id, or undefined for a ticket that is invalid,
   * expired, made for something else or already used. Of several posts of one ticket, on any
   * instances, exactly one gets the user id.
   */
  async consume(
    ticket: string,
    input: { requestBinding: string; csrfCookie: string },
  ): Promise<string | undefined> {
    let payload;
    try {
      ({ payload } = await jwtVerify(ticket, this.key, {
        algorithms: ['HS256'],
        typ: TICKET_TYP,
        audience: this.audience,
        requiredClaims: ['sub', 'exp', 'jti'],
        currentDate: this.clock.now(),
      }));
    } catch (err) {
      if (err instanceof errors.JOSEError) return undefined;
      throw err;
    }
    if (payload.req !== input.requestBinding || payload.csrf !== digest(input.csrfCookie)) return undefined;
    if (typeof payload.jti !== 'string' || !TICKET_ID.test(payload.jti)) return undefined;
    const taken = await this.store.db
      .insertInto('used_login_tickets')
      .values({ ticket_id: payload.jti, expires_at: iso(new Date(payload.exp! * 1000)) })
      .onConflict((oc) => oc.column('ticket_id').doNothing())
      .executeTakeFirst();
    return Number(taken.numInsertedOrUpdatedRows ?? 0n) === 1 ? payload.sub : undefined;
  }
}

/** A digest of the values that make an authorization request what it is. */
export function requestBinding(values: (string | undefined)[]): string {
  return digest(JSON.stringify(values));
}

function digest(s: string): string {
  return createHash('sha256').update(s).digest('base64url');
}
