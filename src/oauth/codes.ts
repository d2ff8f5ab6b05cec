import { randomBytes } from 'node:crypto';
import { iso } from '../domain/clock.js';
import type { CoreDeps } from '../domain/context.js';
import { newId } from '../domain/ids.js';
import { verifierMatches } from './pkce.js';
import { sha256Hex, type RefreshTokens } from './refresh.js';

/** Codes are exchanged by the client right after the redirect; a minute is plenty (RFC 6749 §4.1.2). */
export const CODE_TTL_SECONDS = 60;
const CODE_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export type CodeFailure =
  'unknown' | 'reused' | 'expired' | 'wrong_client' | 'wrong_redirect_uri' | 'wrong_verifier';

export class CodeRejected extends Error {
  constructor(readonly reason: CodeFailure) {
    super(MESSAGES[reason]);
    this.name = 'CodeRejected';
  }
}

const MESSAGES: Record<CodeFailure, string> = {
  unknown: 'The authorization code is not valid.',
  reused: 'The authorization code was already used; the tokens issued for it are revoked.',
  expired: 'The authorization code has expired.',
  wrong_client: 'The authorization code was issued to another client.',
  wrong_redirect_uri: 'The redirect_uri does not match the one the code was issued for.',
  wrong_verifier: 'The code_verifier does not match the code_challenge.',
};

export interface RedeemedCode {
  userId: string;
  scope: string[];
  familyId: string;
  refreshToken: string;
}

/**
 * Authorization codes: random, stored as hashes, single-use, 60 seconds, bound to the client,
 * the redirect URI and the PKCE challenge. A mismatched redemption fails without using the code
 * up (as node-oidc-provider does), so a stray request cannot spoil the real client's exchange; a
 * second successful-looking exchange fails and revokes the refresh-token family (and with it the
 * access tokens) that the first exchange issued (RFC 6749 §4.1.2, RFC 9700 §4.5.3).
 */
export class AuthorizationCodes {
  constructor(
    private readonly deps: Pick<CoreDeps, 'store' | 'clock'>,
    private readonly refresh: RefreshTokens,
  ) {}

  async issue(input: {
    clientId: string;
    userId: string;
    redirectUri: string;
    scope: readonly string[];
    codeChallenge: string;
  }): Promise<string> {
    const code = randomBytes(32).toString('base64url');
    const now = this.deps.clock.now();
    await this.deps.store.db
      .insertInto('authorization_codes')
      .values({
        id: newId('acd', now.getTime()),
        code_hash: sha256Hex(code),
        client_id: input.clientId,
        user_id: input.userId,
        redirect_uri: input.redirectUri,
        scope: input.scope.join(' '),
        code_challenge: input.codeChallenge,
        expires_at: iso(new Date(now.getTime() + CODE_TTL_SECONDS * 1000)),
        used_at: null,
        family_id: null,
        created_at: iso(now),
      })
      .execute();
    return code;
  }

  /** Exchanges a code for a new refresh-token family; throws CodeRejected. */
  async redeem(input: {
    code: string;
    clientId: string;
    redirectUri: string;
    codeVerifier: string;
  }): Promise<RedeemedCode> {
    if (!CODE_SHAPE.test(input.code)) throw new CodeRejected('unknown');
    type Outcome = { ok: RedeemedCode } | { failure: CodeFailure; revokeFamily?: string | null };
    const outcome = await this.deps.store.db.transaction().execute(async (trx): Promise<Outcome> => {
      const row = await trx
        .selectFrom('authorization_codes')
        .selectAll()
        .where('code_hash', '=', sha256Hex(input.code))
        .executeTakeFirst();
      if (!row) return { failure: 'unknown' };
      if (row.used_at !== null) return { failure: 'reused', revokeFamily: row.family_id };
      const now = this.deps.clock.now();
      if (row.expires_at <= iso(now)) return { failure: 'expired' };
      if (row.client_id !== input.clientId) return { failure: 'wrong_client' };
      if (row.redirect_uri !== input.redirectUri) return { failure: 'wrong_redirect_uri' };
      if (!verifierMatches(input.codeVerifier, row.code_challenge)) return { failure: 'wrong_verifier' };

      const taken = await trx
        .updateTable('authorization_codes')
        .set({ used_at: iso(now) })
        .where('id', '=', row.id)
        .where('used_at', 'is', null)
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) !== 1) {
        // A parallel exchange won; its family is committed by now (the UPDATE waited for it).
        const winner = await trx
          .selectFrom('authorization_codes')
          .select('family_id')
          .where('id', '=', row.id)
          .executeTakeFirst();
        return { failure: 'reused', revokeFamily: winner?.family_id ?? null };
      }
      const scope = row.scope.split(' ').filter((s) => s !== '');
      const family = await this.refresh.startFamily(trx, {
        clientId: row.client_id,
        subject: row.user_id,
        scope,
        authorizationCodeId: row.id,
      });
      await trx
        .updateTable('authorization_codes')
        .set({ family_id: family.familyId })
        .where('id', '=', row.id)
        .execute();
      return { ok: { userId: row.user_id, scope, familyId: family.familyId, refreshToken: family.token } };
    });
    if ('ok' in outcome) return outcome.ok;
    if (outcome.revokeFamily)
      await this.refresh.revokeFamily(outcome.revokeFamily, 'authorization_code_reuse');
    throw new CodeRejected(outcome.failure);
  }
}
