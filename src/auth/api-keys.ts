import * as crypto from 'node:crypto';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../domain/clock.js';
import { iso } from '../domain/clock.js';
import type { CoreDeps } from '../domain/context.js';
import { DomainError, notFound, Problems } from '../domain/errors.js';
import { newId } from '../domain/ids.js';
import type { RequestUsers } from '../domain/request-users.js';
import { liveUser, toUser } from '../domain/users.js';
import { fixedQuery } from '../store/fixed-query.js';
import type { KeyMode, Tier } from '../store/types.js';
import type { Principal } from './principal.js';

import { scopesForRole } from './scopes.js';

/** The one read behind every API-key request: compiled once, run with the hash. */
const keyByHash = fixedQuery((db, hash: string) =>
  db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .select([
      'api_keys.id as key_id',
      'api_keys.tier',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'users.deleted_at',
      // The whole live user (toUser's fields), so a call can answer "my own user" without reading it again.
      'users.id',
      'users.role',
      'users.organization_id',
      'users.handle',
      'users.email',
      'users.first_name',
      'users.last_name',
      'users.email_verified_at',
      'users.created_at',
      'users.updated_at',
    ])
    .where('api_keys.key_hash', '=', hash),
);

/**
 * API keys look like `atr_live_<32 hex>_<6 hex checksum>`. The checksum lets a mistyped key be
 * refused without touching the store; the store keeps only the SHA-256 of the whole key.
 */
export const TIERS: readonly Tier[] = ['free', 'starter', 'growth', 'enterprise'];
export const KEY_MODES: readonly KeyMode[] = ['test', 'live'];
const KEY_SHAPE = /^atr_(test|live)_([0-9a-f]{32})_([0-9a-f]{6})$/;
/** last_used_at is written at most once a minute per key, not on every request. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export interface CreatedApiKey {
  id: string;
  key: string;
  prefix: string;
  tier: Tier | null;
  mode: KeyMode;
  user_id: string;
}

/**
 * Every request with a key hashes twice (the key, its checksum). The one-shot `crypto.hash`
 * (Node 20.12+) skips the Hash object and costs about half; older Node falls back to createHash.
 */
const sha256: (s: string) => string =
  typeof crypto.hash === 'function'
    ? (s) => crypto.hash('sha256', s, 'hex')
    : (s) => createHash('sha256').update(s).digest('hex');
const checksum = (mode: string, random: string) => sha256(`${mode}:${random}`).slice(0, 6);

export function looksLikeApiKey(key: string): boolean {
  const m = KEY_SHAPE.exec(key);
  if (!m) return false;
  const expected = Buffer.from(checksum(m[1]!, m[2]!));
  return timingSafeEqual(expected, Buffer.from(m[3]!));
}

export class ApiKeyService {
  private readonly lastWritten = new Map<string, number>();
  private readonly clock: Clock;

  constructor(private readonly deps: CoreDeps) {
    this.clock = deps.clock;
  }

  async create(input: { userId: string; tier?: Tier | null; mode?: KeyMode }): Promise<CreatedApiKey> {
    const mode = input.mode ?? 'test';
    const tier = input.tier ?? null;
    const problems = new Problems();
    if (!KEY_MODES.includes(mode)) problems.add('mode', 'mode must be test or live', 'invalid_enum');
    if (tier !== null && !TIERS.includes(tier))
      problems.add('tier', 'tier must be one of free, starter, growth, enterprise', 'invalid_enum');
    problems.throwIfAny();
    await liveUser(this.deps.store.db, this.deps.store.dialect, input.userId);

    const random = randomBytes(16).toString('hex');
    const key = `atr_${mode}_${random}_${checksum(mode, random)}`;
    const now = this.clock.now();
    const id = newId('key', now.getTime());
    const prefix = key.slice(0, 'atr_test_'.length + 6);
    await this.deps.store.db
      .insertInto('api_keys')
      .values({
        id,
        user_id: input.userId,
        key_hash: sha256(key),
        prefix,
        tier,
        mode,
        last_used_at: null,
        revoked_at: null,
        created_at: iso(now),
      })
      .execute();
    return { id, key, prefix, tier, mode, user_id: input.userId };
  }

  async revoke(id: string): Promise<{ id: string; revoked_at: string }> {
    const row = await this.deps.store.db
      .selectFrom('api_keys')
      .select(['id', 'revoked_at'])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('API key', id);
    const revokedAt = row.revoked_at ?? iso(this.clock.now());
    if (!row.revoked_at)
      await this.deps.store.db
        .updateTable('api_keys')
        .set({ revoked_at: revokedAt })
        .where('id', '=', id)
        .execute();
    return { id, revoked_at: revokedAt };
  }

  /**
   * Resolves a presented key to its caller, or throws `invalid_api_key` (same error for every
   * failure). The caller's user, read by the same statement, is remembered in `seen` when given.
   */
  async resolve(key: string, seen?: RequestUsers): Promise<Principal> {
    const invalidKey = () => new DomainError('invalid_api_key', 'The API key is not valid.');
    // Hash before the shape check so a malformed key costs about what a well-formed unknown one does.
    const hash = sha256(key);
    if (!looksLikeApiKey(key)) throw invalidKey();
    const [row] = await keyByHash(this.deps.store.db, this.deps.store.dialect, hash);
    if (!row || row.revoked_at !== null || row.deleted_at !== null) throw invalidKey();
    this.touch(row.key_id, row.last_used_at);
    seen?.remember(toUser(row));
    return {
      id: row.id,
      kind: 'user',
      role: row.role,
      scopes: scopesForRole(row.role),
      via: 'api_key',
      tier: row.tier,
      apiKeyId: row.key_id,
      clientId: null,
      tokenExpiresAt: null,
      rateLimitKey: `key:${row.key_id}`,
    };
  }

  /** Keeps last_used_at within a minute of the truth with at most one write a minute per key. */
  private touch(keyId: string, storedLastUsed: string | null): void {
    const now = this.clock.now().getTime();
    const known = Math.max(this.lastWritten.get(keyId) ?? 0, storedLastUsed ? Date.parse(storedLastUsed) : 0);
    if (now - known < LAST_USED_WRITE_INTERVAL_MS) return;
    this.lastWritten.set(keyId, now);
    if (this.lastWritten.size > 100_000) this.lastWritten.clear();
    void this.deps.store.db
      .updateTable('api_keys')
      .set({ last_used_at: new Date(now).toISOString() })
      .where('id', '=', keyId)
      .execute()
      .catch(() => this.lastWritten.delete(keyId));
  }
}
