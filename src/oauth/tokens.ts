import { randomBytes } from 'node:crypto';
import { decodeProtectedHeader, errors, jwtVerify, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import type { Clock } from '../domain/clock.js';
import { unixSeconds } from '../domain/clock.js';
import type { SigningKeys } from './keys.js';

/** Access tokens live 15 minutes (the spec's refresh response says 900). */
export const ACCESS_TOKEN_TTL_SECONDS = 900;
/** Refresh tokens live 30 days from their issue. */
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
/** Leeway for clocks that disagree a little between this server and the one that signed. */
export const CLOCK_TOLERANCE_SECONDS = 10;
/** RFC 9068 §2.1: the media type that tells an access token from any other JWT. */
export const ACCESS_TOKEN_TYP = 'at+jwt';
/** Longer than any token we issue: 2 KiB of RS256 signature and claims is already generous. */
export const MAX_JWT_LENGTH = 8192;

/** The JWT access-token claims (RFC 9068 plus the spec's `type`). */
export interface AccessClaims {
  iss: string;
  aud: string | string[];
  sub: string;
  client_id: string | undefined;
  scope: string[];
  iat: number;
  exp: number;
  /** Always on tokens we issue; a foreign HS256 issuer need not send one (the spec lists none). */
  jti: string | undefined;
  /** The grant (refresh-token family) the token came from; revoking it revokes the token. */
  sid: string | undefined;
}

export interface IssuedAccessToken {
  token: string;
  expiresIn: number;
  expiresAt: Date;
  claims: AccessClaims;
}

/** Why a token was refused: expired is its own answer (`token_expired`), everything else is one. */
export class TokenRejected extends Error {
  constructor(
    readonly reason: 'invalid' | 'expired',
    message: string,
  ) {
    super(message);
    this.name = 'TokenRejected';
  }
}

/**
 * Where signing and verification keys come from (the RS256 key store or the HS256 secret), and
 * what a token's header must say in that variant.
 */
export interface TokenKeys {
  readonly alg: 'RS256' | 'HS256';
  /**
   * Header `typ` values accepted, normalised (lower case, no `application/`); `undefined` in the
   * list means the member may be absent.
   */
  readonly acceptedTyp: readonly (string | undefined)[];
  /** Claims a token must carry besides the spec's `type: access`, iss and aud. */
  readonly requiredClaims: readonly string[];
  signingKey(): Promise<{ kid: string | undefined; key: CryptoKey | Uint8Array }>;
  /** The key for a header's kid, or undefined when the header does not name a key we hold. */
  verificationKey(kid: string | undefined): Promise<CryptoKey | Uint8Array | undefined>;
}

export function rs256Keys(keys: SigningKeys): TokenKeys {
  return {
    alg: 'RS256',
    // RFC 9068 as it stands: only this server's own at+jwt access tokens.
    acceptedTyp: [ACCESS_TOKEN_TYP],
    requiredClaims: ['exp', 'iat', 'sub', 'jti'],
    signingKey: () => keys.signingKey(),
    async verificationKey(kid) {
      // Kids are our own JWK thumbprints; anything else is refused before any lookup.
      if (kid === undefined || !/^[A-Za-z0-9_-]{1,128}$/.test(kid)) return undefined;
      return keys.verificationKey(kid);
    },
  };
}

/**
 * The symmetric variant: one secret, no kid (a kid in the header names nothing here). Another
 * service holding the same JWT_SECRET may issue tokens too, with the spec's claims and a plain
 * `{"alg":"HS256","typ":"JWT"}` header: here the spec's `type: access` claim is what tells an
 * access token from any other JWT, so a missing or `JWT` typ is accepted beside our `at+jwt`, and
 * any other explicit type (a login ticket, a DPoP proof, an ID token's) is still refused.
 */
export function hs256Keys(secret: string): TokenKeys {
  const key = new TextEncoder().encode(secret);
  return {
    alg: 'HS256',
    acceptedTyp: [ACCESS_TOKEN_TYP, 'jwt', undefined],
    // The spec's claim list: sub, scope, iat, exp, type (and iss, aud, checked below). No jti.
    requiredClaims: ['exp', 'iat', 'sub'],
    signingKey: async () => ({ kid: undefined, key }),
    verificationKey: async (kid) => (kid === undefined ? key : undefined),
  };
}

/** Header members an access token may carry. jku, x5u, jwk, x5c, crit and the rest are refused. */
const ALLOWED_HEADER = new Set(['alg', 'typ', 'kid']);
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Issues and checks JWT access tokens (RFC 9068, RFC 8725): one algorithm allowed, the key found
 * by kid among our own keys, the variant's explicit type (`at+jwt`; see hs256Keys), and iss, aud,
 * exp, nbf, iat and `type` all checked. Issued tokens always carry `typ: at+jwt` and a jti.
 */
export class AccessTokens {
  constructor(
    private readonly keys: TokenKeys,
    private readonly clock: Clock,
    readonly issuer: string,
    readonly audience: string,
  ) {}

  get alg(): 'RS256' | 'HS256' {
    return this.keys.alg;
  }

  async issue(input: {
    subject: string;
    clientId: string;
    scope: readonly string[];
    grantId?: string | undefined;
  }): Promise<IssuedAccessToken> {
    const now = this.clock.now();
    const iat = unixSeconds(now);
    const jti = randomBytes(16).toString('base64url');
    const claims: AccessClaims = {
      iss: this.issuer,
      aud: this.audience,
      sub: input.subject,
      client_id: input.clientId,
      scope: [...input.scope],
      iat,
      exp: iat + ACCESS_TOKEN_TTL_SECONDS,
      jti,
      sid: input.grantId,
    };
    const { kid, key } = await this.keys.signingKey();
    const payload: JWTPayload = {
      client_id: claims.client_id,
      scope: claims.scope.join(' '),
      type: 'access',
      ...(claims.sid ? { sid: claims.sid } : {}),
    };
    const token = await new SignJWT(payload)
      .setProtectedHeader({ alg: this.keys.alg, typ: ACCESS_TOKEN_TYP, ...(kid ? { kid } : {}) })
      .setIssuer(claims.iss)
      .setAudience(this.audience)
      .setSubject(claims.sub)
      .setIssuedAt(claims.iat)
      .setExpirationTime(claims.exp)
      .setJti(jti)
      .sign(key);
    return { token, expiresIn: ACCESS_TOKEN_TTL_SECONDS, expiresAt: new Date(claims.exp * 1000), claims };
  }

  /** The claims of a valid access token; throws TokenRejected otherwise. Store failures propagate. */
  async verify(token: string): Promise<AccessClaims> {
    if (token.length > MAX_JWT_LENGTH || !JWT_SHAPE.test(token))
      throw invalid('The access token is malformed.');
    let header: Record<string, unknown>;
    try {
      header = decodeProtectedHeader(token) as Record<string, unknown>;
    } catch {
      throw invalid('The access token header is malformed.');
    }
    const extra = Object.keys(header).filter((k) => !ALLOWED_HEADER.has(k));
    if (extra.length > 0) throw invalid(`The access token header may not carry ${extra.join(', ')}.`);
    if (header.alg !== this.keys.alg)
      throw invalid('The access token is not signed with the expected algorithm.');
    if (header.kid !== undefined && typeof header.kid !== 'string')
      throw invalid('The access token kid is malformed.');
    if (header.typ !== undefined && typeof header.typ !== 'string')
      throw invalid('The access token typ is malformed.');
    if (!this.keys.acceptedTyp.includes(normalizedTyp(header.typ as string | undefined)))
      throw invalid(
        `The token is not an access token (typ must be ${this.keys.acceptedTyp.filter((t) => t).join(' or ')}).`,
      );
    const key = await this.keys.verificationKey(header.kid as string | undefined);
    if (!key) throw invalid('The access token was not signed by a key of this server.');

    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [this.keys.alg],
        issuer: this.issuer,
        audience: this.audience,
        requiredClaims: [...this.keys.requiredClaims],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: this.clock.now(),
      }));
    } catch (err) {
      if (err instanceof errors.JWTExpired)
        throw new TokenRejected('expired', 'The access token has expired.');
      if (err instanceof errors.JOSEError) throw invalid(describe(err));
      throw err;
    }
    return this.claims(payload);
  }

  private claims(payload: JWTPayload): AccessClaims {
    if (payload.type !== 'access') throw invalid('The token is not an access token.');
    const now = unixSeconds(this.clock.now());
    if (payload.iat! > now + CLOCK_TOLERANCE_SECONDS)
      throw invalid('The access token was issued in the future.');
    // A token claiming a longer life than any we issue was not issued by us.
    if (payload.exp! - payload.iat! > ACCESS_TOKEN_TTL_SECONDS)
      throw invalid('The access token lives longer than this server issues tokens for.');
    if (typeof payload.sub !== 'string' || payload.sub === '')
      throw invalid('The access token has no subject.');
    if (payload.client_id !== undefined && typeof payload.client_id !== 'string')
      throw invalid('The access token client_id is malformed.');
    if (payload.sid !== undefined && typeof payload.sid !== 'string')
      throw invalid('The access token sid is malformed.');
    if (payload.jti !== undefined && (typeof payload.jti !== 'string' || payload.jti === ''))
      throw invalid('The access token jti is malformed.');
    return {
      iss: payload.iss!,
      aud: payload.aud!,
      sub: payload.sub,
      client_id: payload.client_id as string | undefined,
      scope: parseScope(payload.scope),
      iat: payload.iat!,
      exp: payload.exp!,
      jti: payload.jti,
      sid: payload.sid as string | undefined,
    };
  }
}

/**
 * The scope claim is a JSON string of space-delimited scope tokens (RFC 9068 §2.2.3, RFC 8693
 * §4.2). A list is refused: we never issue one, and accepting a second form only invites
 * confusion about what was granted.
 */
function parseScope(claim: unknown): string[] {
  if (typeof claim !== 'string') throw invalid('The access token scope must be a space-delimited string.');
  const scopes = claim.split(' ').filter((s) => s !== '');
  if (!scopes.every((s) => SCOPE_TOKEN.test(s))) throw invalid('The access token scope is malformed.');
  return scopes;
}

function describe(err: InstanceType<typeof errors.JOSEError>): string {
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return 'The access token is not valid yet.';
    if (err.claim === 'iss') return 'The access token was issued by another issuer.';
    if (err.claim === 'aud') return 'The access token is meant for another audience.';
    return `The access token claim ${err.claim} is invalid.`;
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'The access token signature is invalid.';
  return 'The access token is not valid.';
}

/** RFC 7515 §4.1.9: media types compare case-insensitively, `application/` may be left out. */
function normalizedTyp(typ: string | undefined): string | undefined {
  if (typ === undefined) return undefined;
  const lower = typ.toLowerCase();
  return lower.startsWith('application/') ? lower.slice('application/'.length) : lower;
}

function invalid(message: string): TokenRejected {
  return new TokenRejected('invalid', message);
}
