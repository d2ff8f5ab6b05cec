import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { iso } from '../domain/clock.js';
import type { CoreDeps } from '../domain/context.js';
import { newId } from '../domain/ids.js';
import type { Database } from '../store/types.js';
import { REFRESH_TOKEN_TTL_SECONDS } from './tokens.js';

const TOKEN_PREFIX = 'art_';
const TOKEN_SHAPE = /^art_[A-Za-z0-9_-]{43}$/;

export const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/** What a refresh token stands for: a grant of `scope` by `subject` to `clientId`. */
export interface Grant {
  familyId: string;
  clientId: string;
  subject: string;
  scope: string[];
}

export type RefreshFailure = 'unknown' | 'wrong_client' | 'revoked' | 'reused' | 'stale';

export class RefreshRejected extends Error {
  constructor(readonly reason: RefreshFailure) {
    super(MESSAGES[reason]);
    this.name = 'RefreshRejected';
  }
}

const MESSAGES: Record<RefreshFailure, string> = {
  unknown: 'The refresh token is not valid. Sign in again.',
  wrong_client: 'The refresh token was issued to another client.',
  revoked: 'The refresh token has been revoked. Sign in again.',
  reused: 'The refresh token was already used; every token of this sign-in is now revoked. Sign in again.',
  stale: 'The refresh token is no longer valid; this sign-in is now revoked. Sign in again.',
};

type Outcome =
  | { kind: 'rotated'; grant: Grant; token: string }
  | { kind: 'refused'; reason: RefreshFailure; revokeFamily?: string };

/**
 * Refresh-token families with exactly the spec's state machine:
 *
 * | family  | presented token                  | result                                        |
 * |---------|----------------------------------|-----------------------------------------------|
 * | active  | the current one                  | it joins the used set; new current token      |
 * | active  | one from the used set            | 401, family revoked                           |
 * | active  | in the family, neither (expired) | 401, family revoked                           |
 * | revoked | any token of the family          | 401                                           |
 * | none    | unknown token                    | 401                                           |
 *
 * Only SHA-256 hashes of tokens are stored. Rotation is one conditional UPDATE (`status =
 * 'current'` and the family not revoked) inside a transaction, so of several parallel refreshes
 * with one token exactly one changes the row; the others find it used, which is reuse.
 */
export class RefreshTokens {
  constructor(private readonly deps: Pick<CoreDeps, 'store' | 'clock'>) {}

  /** Opens a family with its first token, inside the caller's transaction. */
  async startFamily(
    db: Kysely<Database>,
    input: {
      clientId: string;
      subject: string;
      scope: readonly string[];
      authorizationCodeId: string | null;
    },
  ): Promise<{ familyId: string; token: string }> {
    const now = this.deps.clock.now();
    const familyId = newId('rtf', now.getTime());
    await db
      .insertInto('refresh_token_families')
      .values({
        id: familyId,
        client_id: input.clientId,
        subject: input.subject,
        scope: input.scope.join(' '),
        authorization_code_id: input.authorizationCodeId,
        revoked_at: null,
        revoked_reason: null,
        created_at: iso(now),
      })
      .execute();
    const token = await this.insertCurrent(db, familyId, now);
    return { familyId, token };
  }

  /**
   * Exchanges the current token of a family for a new one; throws RefreshRejected otherwise.
   * `check` sees the grant before anything changes; if it throws, nothing is rotated.
   */
  async rotate(
    token: string,
    clientId: string,
    check: (grant: Grant) => void = () => undefined,
  ): Promise<Grant & { token: string }> {
    if (!TOKEN_SHAPE.test(token)) throw new RefreshRejected('unknown');
    const hash = sha256Hex(token);
    const outcome = await this.deps.store.db.transaction().execute(async (trx): Promise<Outcome> => {
      const row = await trx
        .selectFrom('refresh_tokens as t')
        .innerJoin('refresh_token_families as f', 'f.id', 't.family_id')
        .select([
          't.id',
          't.status',
          't.expires_at',
          'f.id as family_id',
          'f.client_id',
          'f.subject',
          'f.scope',
          'f.revoked_at',
        ])
        .where('t.token_hash', '=', hash)
        .executeTakeFirst();
      if (!row) return { kind: 'refused', reason: 'unknown' };
      // Someone else's token changes nothing: the family is not theirs to revoke.
      if (row.client_id !== clientId) return { kind: 'refused', reason: 'wrong_client' };
      if (row.revoked_at !== null) return { kind: 'refused', reason: 'revoked' };
      if (row.status === 'used') return { kind: 'refused', reason: 'reused', revokeFamily: row.family_id };
      const now = this.deps.clock.now();
      if (row.expires_at <= iso(now))
        return { kind: 'refused', reason: 'stale', revokeFamily: row.family_id };
      const grant: Grant = {
        familyId: row.family_id,
        clientId: row.client_id,
        subject: row.subject,
        scope: row.scope.split(' ').filter((s) => s !== ''),
      };
      check(grant);

      const moved = await trx
        .updateTable('refresh_tokens')
        .set({ status: 'used', used_at: iso(now) })
        .where('id', '=', row.id)
        .where('status', '=', 'current')
        .where((eb) =>
          eb.exists(
            eb
              .selectFrom('refresh_token_families')
              .select('id')
              .where('id', '=', row.family_id)
              .where('revoked_at', 'is', null),
          ),
        )
        .executeTakeFirst();
      // Another refresh with this token committed first: this presentation is a reuse.
      if (Number(moved.numUpdatedRows) !== 1)
        return { kind: 'refused', reason: 'reused', revokeFamily: row.family_id };
      const next = await this.insertCurrent(trx, row.family_id, now);
      return { kind: 'rotated', token: next, grant };
    });
    if (outcome.kind === 'rotated') return { ...outcome.grant, token: outcome.token };
    // Revoked after the transaction, so the revocation stands even though this request fails.
    if (outcome.revokeFamily) await this.revokeFamily(outcome.revokeFamily, outcome.reason);
    throw new RefreshRejected(outcome.reason);
  }

  async revokeFamily(
    familyId: string,
    reason: string,
    db: Kysely<Database> = this.deps.store.db,
  ): Promise<void> {
    await db
      .updateTable('refresh_token_families')
      .set({ revoked_at: iso(this.deps.clock.now()), revoked_reason: reason })
      .where('id', '=', familyId)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /** True while the family exists and is not revoked; access tokens of a revoked family stop working. */
  async isFamilyActive(familyId: string): Promise<boolean> {
    const row = await this.deps.store.db
      .selectFrom('refresh_token_families')
      .select('revoked_at')
      .where('id', '=', familyId)
      .executeTakeFirst();
    return row !== undefined && row.revoked_at === null;
  }

  /** True when an opaque string is one of our refresh tokens (any state). */
  async isKnownToken(token: string): Promise<boolean> {
    if (!TOKEN_SHAPE.test(token)) return false;
    const row = await this.deps.store.db
      .selectFrom('refresh_tokens')
      .select('id')
      .where('token_hash', '=', sha256Hex(token))
      .executeTakeFirst();
    return row !== undefined;
  }

  private async insertCurrent(db: Kysely<Database>, familyId: string, now: Date): Promise<string> {
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    await db
      .insertInto('refresh_tokens')
      .values({
        id: newId('rtk', now.getTime()),
        family_id: familyId,
        token_hash: sha256Hex(token),
        status: 'current',
        expires_at: iso(new Date(now.getTime() + REFRESH_TOKEN_TTL_SECONDS * 1000)),
        created_at: iso(now),
        used_at: null,
      })
      .execute();
    return token;
  }
}
