import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type CryptoKey,
  type JWK,
} from 'jose';
import type { Selectable } from 'kysely';
import type { Clock } from '../domain/clock.js';
import { iso } from '../domain/clock.js';
import type { Store } from '../store/store.js';
import type { SigningKeysTable } from '../store/types.js';

/** How long anyone may cache the JWKS (its Cache-Control max-age). */
export const JWKS_MAX_AGE_SECONDS = 3600;
/**
 * A new key signs nothing until every cached JWKS has had time to expire and be fetched again, plus
 * a margin for clock skew between instances and verifiers.
 */
export const ACTIVATION_DELAY_SECONDS = JWKS_MAX_AGE_SECONDS + 300;
/** Keys are re-read this often, so a rotation by another instance or the CLI is seen soon. */
const CACHE_TTL_MS = 60_000;
/** An unknown kid may trigger a re-read at most this often, so random kids cannot flood the store. */
const UNKNOWN_KID_RELOAD_INTERVAL_MS = 5_000;
/**
 * Milliseconds on a monotonic clock, for how long ago the keys were read: the wall clock can step
 * backwards (an NTP step, a restored VM), and a cache aged by it would then stay "fresh" for as
 * long as the step. Key dates (published_at, active_from, retired_at) stay on the wall clock.
 */
const elapsedMs = (): number => performance.now();
const BOOTSTRAP_SETTING = 'oauth_first_signing_key';
const PUBLIC_MEMBERS = ['kty', 'n', 'e'] as const;

export interface PublicJwk {
  kty: string;
  n: string;
  e: string;
  kid: string;
  alg: 'RS256';
  use: 'sig';
}

export interface RotatedKey {
  kid: string;
  published_at: string;
  active_from: string;
}

type KeyRow = Selectable<SigningKeysTable>;

/**
 * RS256 signing keys kept in the store, so every instance signs with and publishes the same keys.
 *
 * Lifecycle: a key is published (in the JWKS) from `published_at`, signs from `active_from`
 * (at least the JWKS max-age later, except the very first key of an empty store, which has no
 * cached JWKS to wait for), stops signing at `retired_at` (the moment its successor becomes
 * active) and leaves the JWKS only once the last token it signed has expired.
 */
export class SigningKeys {
  private rows: KeyRow[] = [];
  /** When the rows were read, and an unknown kid last re-read them: `elapsedMs()`, not the wall clock. */
  private loadedAt = -Infinity;
  private lastUnknownKidReload = -Infinity;
  private readonly imported = new Map<string, Promise<CryptoKey>>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** How long a token signed at retirement stays valid: the access-token lifetime plus leeway. */
    private readonly retainAfterRetirementSeconds: number,
  ) {}

  /** The key to sign with now; makes the first key of an empty store. */
  async signingKey(): Promise<{ kid: string; key: CryptoKey }> {
    let row = this.activeRow(await this.current());
    if (!row) {
      row = this.activeRow(await this.reload());
      if (!row && this.rows.length === 0) {
        await this.bootstrap();
        row = this.activeRow(await this.reload());
      }
    }
    if (!row) throw new Error('no active signing key; run "atrium signing-keys rotate"');
    return { kid: row.kid, key: await this.importKey(row, 'private') };
  }

  /** The public key for a kid, or undefined; an unknown kid re-reads the store, rate-limited. */
  async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    let row = this.publishedRows(await this.current()).find((r) => r.kid === kid);
    const now = elapsedMs();
    if (!row && now - this.lastUnknownKidReload >= UNKNOWN_KID_RELOAD_INTERVAL_MS) {
      this.lastUnknownKidReload = now;
      row = this.publishedRows(await this.reload()).find((r) => r.kid === kid);
    }
    return row ? this.importKey(row, 'public') : undefined;
  }

  /** The JWK Set: every published key, public members only. */
  async jwks(): Promise<{ keys: PublicJwk[] }> {
    let rows = await this.current();
    if (rows.length === 0) {
      // Publishing an empty set would make verifiers cache "no keys" for an hour.
      await this.signingKey();
      rows = this.rows;
    }
    return { keys: this.publishedRows(rows).map(publicJwk) };
  }

  /**
   * Publishes a new key. It signs from `active_from`, one JWKS max-age (plus margin) from now, and
   * the keys signing until then retire at that moment. On an empty store the key is active at once.
   */
  async rotate(): Promise<RotatedKey> {
    const rows = await this.reload();
    if (rows.length === 0) {
      const first = await this.bootstrap();
      if (first) return first;
    }
    const now = this.clock.now();
    const activeFrom = new Date(now.getTime() + ACTIVATION_DELAY_SECONDS * 1000);
    const row = await newKeyRow(now, activeFrom);
    await this.store.db.transaction().execute(async (trx) => {
      await trx.insertInto('signing_keys').values(row).execute();
      // Every older key that would still sign after the new one starts stops at that moment.
      await trx
        .updateTable('signing_keys')
        .set({ retired_at: row.active_from })
        .where('kid', '!=', row.kid)
        .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', row.active_from)]))
        .execute();
    });
    await this.reload();
    return { kid: row.kid, published_at: row.published_at, active_from: row.active_from };
  }

  private async current(): Promise<KeyRow[]> {
    if (elapsedMs() - this.loadedAt < CACHE_TTL_MS) return this.rows;
    return this.reload();
  }

  private async reload(): Promise<KeyRow[]> {
    this.rows = await this.store.db.selectFrom('signing_keys').selectAll().execute();
    this.loadedAt = elapsedMs();
    return this.rows;
  }

  /** The newest key whose signing period covers now. */
  private activeRow(rows: KeyRow[]): KeyRow | undefined {
    const now = iso(this.clock.now());
    return rows
      .filter((r) => r.active_from <= now && (r.retired_at === null || r.retired_at > now))
      .sort((a, b) =>
        a.active_from === b.active_from ? a.kid.localeCompare(b.kid) : a.active_from < b.active_from ? -1 : 1,
      )
      .at(-1);
  }

  /** Keys verifiers may see: published, and not retired longer ago than a token can live. */
  private publishedRows(rows: KeyRow[]): KeyRow[] {
    const now = this.clock.now().getTime();
    return rows.filter((r) => {
      if (Date.parse(r.published_at) > now) return false;
      if (r.retired_at === null) return true;
      return Date.parse(r.retired_at) + this.retainAfterRetirementSeconds * 1000 > now;
    });
  }

  /**
   * Makes the first key, active at once. A settings row taken in the same transaction makes sure
   * only one of several instances starting together creates it; the others read the winner's key.
   */
  private async bootstrap(): Promise<RotatedKey | undefined> {
    const now = this.clock.now();
    const row = await newKeyRow(now, now);
    const won = await this.store.db.transaction().execute(async (trx) => {
      const claimed = await trx
        .insertInto('settings')
        .values({ key: BOOTSTRAP_SETTING, value: row.kid })
        .onConflict((oc) => oc.column('key').doNothing())
        .executeTakeFirst();
      if (Number(claimed.numInsertedOrUpdatedRows ?? 0) !== 1) return false;
      await trx.insertInto('signing_keys').values(row).execute();
      return true;
    });
    await this.reload();
    return won ? { kid: row.kid, published_at: row.published_at, active_from: row.active_from } : undefined;
  }

  private importKey(row: KeyRow, which: 'private' | 'public'): Promise<CryptoKey> {
    const cacheKey = `${which}:${row.kid}`;
    let key = this.imported.get(cacheKey);
    if (!key) {
      const jwk = JSON.parse(which === 'private' ? row.private_jwk : row.public_jwk) as JWK;
      key = importJWK(jwk, 'RS256') as Promise<CryptoKey>;
      this.imported.set(cacheKey, key);
    }
    return key;
  }
}

async function newKeyRow(publishedAt: Date, activeFrom: Date): Promise<KeyRow> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', {
    modulusLength: 2048,
    extractable: true,
  });
  const publicJwk = await exportJWK(publicKey);
  const privateJwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  return {
    kid,
    alg: 'RS256',
    public_jwk: JSON.stringify({ kty: publicJwk.kty, n: publicJwk.n, e: publicJwk.e }),
    private_jwk: JSON.stringify(privateJwk),
    published_at: iso(publishedAt),
    active_from: iso(activeFrom),
    retired_at: null,
    created_at: iso(publishedAt),
  };
}

function publicJwk(row: KeyRow): PublicJwk {
  const stored = JSON.parse(row.public_jwk) as Record<string, string>;
  const out = Object.fromEntries(PUBLIC_MEMBERS.map((m) => [m, stored[m]])) as Pick<
    PublicJwk,
    'kty' | 'n' | 'e'
  >;
  return { ...out, kid: row.kid, alg: 'RS256', use: 'sig' };
}
