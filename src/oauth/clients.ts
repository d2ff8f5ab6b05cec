import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ALL_SCOPES } from '../auth/scopes.js';
import type { Config } from '../config/schema.js';
import { iso } from '../domain/clock.js';
import type { CoreDeps } from '../domain/context.js';
import { Problems } from '../domain/errors.js';
import { liveUser } from '../domain/users.js';
import { newId } from '../domain/ids.js';
import { hasControlCharacter } from '../domain/validate.js';
import type { Selectable } from 'kysely';
import type { OAuthClientsTable } from '../store/types.js';
import { settingOnce } from './settings.js';

export type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials';

export interface OAuthClient {
  id: string;
  name: string;
  /** Has a secret and authenticates with HTTP Basic; public clients only name themselves. */
  confidential: boolean;
  redirectUris: readonly string[];
  scopes: readonly string[];
  grantTypes: readonly GrantType[];
  /** First-party clients skip the consent page. */
  firstParty: boolean;
  userId: string | null;
}

export interface CreateClientInput {
  name: string;
  redirectUris?: readonly string[] | undefined;
  /** Allowed scopes, a list or a space-delimited string; every scope when omitted. */
  scopes?: readonly string[] | string | undefined;
  public?: boolean | undefined;
  firstParty?: boolean | undefined;
  /** The user who registered the client (its owner), if any. */
  userId?: string | null | undefined;
}

/** What the registrant sees once: the secret is never stored or shown again. */
export interface CreatedClient {
  client_id: string;
  client_secret: string | null;
  redirect_uris: string[];
  scopes: string[];
}

const sha256 = (s: string) => createHash('sha256').update(s).digest();
// Compared against when the client is unknown, so both failures cost the same work.
const DUMMY_HASH = sha256(randomBytes(32).toString('hex'));
const SECRET_PREFIX = 'acs_';
const OPERATOR_CLIENT_SETTING = 'oauth_operator_client_id';
const PRINTABLE_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * OAuth clients. Secrets are 256 random bits, so their SHA-256 is as hard to reverse as the
 * secret is to guess; a memory-hard hash (as passwords get) would only hand an attacker a cheap
 * way to burn 32 MiB of server memory per request on the token endpoint.
 */
export class ClientService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly config: Pick<Config, 'nodeEnv'>,
  ) {}

  /** Registers a client; the seed script and `atrium clients create` both come through here. */
  async create(input: CreateClientInput): Promise<CreatedClient> {
    const problems = new Problems();
    const name = typeof input.name === 'string' ? input.name.trim() : '';
    if (name.length < 1 || name.length > 100 || hasControlCharacter(name))
      problems.add('name', 'name must be 1 to 100 characters, without control characters');
    const redirectUris = [...(input.redirectUris ?? [])];
    for (const uri of redirectUris) {
      const bad = this.redirectUriProblem(uri);
      if (bad) problems.add('redirect_uris', `redirect URI ${JSON.stringify(uri)} ${bad}`);
    }
    const scopes = normaliseScopes(input.scopes);
    const unknown = scopes.filter((s) => !(ALL_SCOPES as readonly string[]).includes(s));
    if (unknown.length > 0) problems.add('scopes', `unknown scopes: ${unknown.join(' ')}`, 'invalid_enum');
    if (scopes.length === 0) problems.add('scopes', 'at least one scope is required');
    problems.throwIfAny();

    if (input.userId) await liveUser(this.deps.store.db, this.deps.store.dialect, input.userId);

    const confidential = input.public !== true;
    const grants: GrantType[] = [];
    if (redirectUris.length > 0) grants.push('authorization_code', 'refresh_token');
    else grants.push('refresh_token');
    if (confidential) grants.push('client_credentials');
    const secret = confidential ? SECRET_PREFIX + randomBytes(32).toString('base64url') : null;
    const now = this.deps.clock.now();
    const id = newId('cli', now.getTime());
    await this.deps.store.db
      .insertInto('oauth_clients')
      .values({
        id,
        name,
        secret_hash: secret === null ? null : sha256(secret).toString('hex'),
        redirect_uris: JSON.stringify(redirectUris),
        scopes: scopes.join(' '),
        grant_types: [...new Set(grants)].join(' '),
        first_party: input.firstParty ? 1 : 0,
        user_id: input.userId ?? null,
        created_at: iso(now),
        revoked_at: null,
      })
      .execute();
    return { client_id: id, client_secret: secret, redirect_uris: redirectUris, scopes };
  }

  /** A live client, or undefined for an unknown or revoked one. */
  async get(id: string): Promise<OAuthClient | undefined> {
    const row = await this.row(id);
    return row && row.revoked_at === null ? toClient(row) : undefined;
  }

  /**
   * Checks a confidential client's secret. Unknown client, revoked client, public client and
   * wrong secret all spend the same hash-and-compare and all answer undefined.
   */
  async authenticate(id: string, secret: string): Promise<OAuthClient | undefined> {
    const row = await this.row(id);
    const presented = sha256(secret);
    const expected = row?.secret_hash ? Buffer.from(row.secret_hash, 'hex') : DUMMY_HASH;
    const same = expected.length === presented.length && timingSafeEqual(expected, presented);
    if (!same || !row || row.secret_hash === null || row.revoked_at !== null) return undefined;
    return toClient(row);
  }

  async revoke(id: string): Promise<void> {
    await this.deps.store.db
      .updateTable('oauth_clients')
      .set({ revoked_at: iso(this.deps.clock.now()) })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /**
   * The public, first-party client that operator-issued tokens (`atrium tokens issue` without
   * --client) belong to, made on first use; its id is kept in settings so every instance agrees.
   */
  async operatorClientId(): Promise<string> {
    return settingOnce(this.deps.store, OPERATOR_CLIENT_SETTING, async () => {
      const created = await this.create({ name: 'Atrium operator tokens', public: true, firstParty: true });
      return created.client_id;
    });
  }

  private async row(id: string): Promise<Selectable<OAuthClientsTable> | undefined> {
    // Ids are short printable ASCII; anything else cannot exist (and a NUL would upset
    // PostgreSQL), so skip the query but not the hashing in authenticate().
    if (!PRINTABLE_ID.test(id)) return undefined;
    return this.deps.store.db.selectFrom('oauth_clients').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Redirect URIs follow RFC 9700 §2.1 and RFC 8252: absolute, no fragment, no user info; https,
   * or http for loopback (any host outside production, for local development), or a private-use
   * scheme in reverse-domain form for native apps. Matching later is exact string comparison.
   */
  redirectUriProblem(uri: string): string | undefined {
    if (typeof uri !== 'string' || uri.length > 2000) return 'must be a string of at most 2000 characters';
    if (/[\s"'<>\\^`{|}]/.test(uri) || hasControlCharacter(uri))
      return 'must not contain spaces, control characters or unsafe characters';
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      return 'must be an absolute URI';
    }
    if (uri.includes('#')) return 'must not contain a fragment';
    if (url.username !== '' || url.password !== '') return 'must not contain user information';
    if (url.protocol === 'https:') return url.hostname ? undefined : 'must name a host';
    if (url.protocol === 'http:') {
      const loopback = ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
      return loopback || this.config.nodeEnv !== 'production'
        ? undefined
        : 'must use https (http is allowed for loopback only)';
    }
    if (/^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(url.protocol)) return undefined;
    return 'must use https, http on loopback, or a reverse-domain private-use scheme';
  }
}

function normaliseScopes(scopes: CreateClientInput['scopes']): string[] {
  if (scopes === undefined) return [...ALL_SCOPES];
  const list = typeof scopes === 'string' ? scopes.split(/\s+/) : [...scopes];
  return [...new Set(list.map((s) => s.trim()).filter((s) => s !== ''))];
}

function toClient(row: Selectable<OAuthClientsTable>): OAuthClient {
  return {
    id: row.id,
    name: row.name,
    confidential: row.secret_hash !== null,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    scopes: row.scopes.split(' ').filter((s) => s !== ''),
    grantTypes: row.grant_types.split(' ').filter((s) => s !== '') as GrantType[],
    firstParty: row.first_party === 1,
    userId: row.user_id,
  };
}
