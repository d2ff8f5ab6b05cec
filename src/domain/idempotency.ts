import { createHash } from 'node:crypto';
import { iso } from './clock.js';
import type { CoreDeps, Tx } from './context.js';
import { inTransaction } from './context.js';
import { DomainError, invalid } from './errors.js';
import { detachedFromRequest } from './request-scope.js';

/**
 * Stripe-style idempotency keys, stored in the database so every instance and every engine agree.
 *
 * A request claims its (caller, key) with one INSERT ... ON CONFLICT DO NOTHING, committed on its
 * own, so exactly one request wins however many arrive at once. The winner does its work in a
 * transaction that also marks the record done and stores the response: the order and the stored
 * response commit together or not at all. If the work fails the claim is released, so a retry is
 * processed afresh. Losers read the record: a different body is 422, an unfinished one 409, a
 * finished one is replayed.
 *
 * A claim is identified by its `created_at`: completion and release only touch the record while
 * it still carries that value, so a claim taken over after a crash can never be completed by the
 * request that lost it.
 */
export const IDEMPOTENCY_RETENTION_SECONDS = 86_400;
/** A claim still unfinished after this long belongs to a process that died; it may be taken over. */
export const IN_FLIGHT_LEASE_MS = 60_000;
const KEY = /^[\x20-\x7e]{1,255}$/;

export interface IdempotencyClaim {
  ownerId: string;
  key: string;
  /** Hash of what makes two requests "the same": see `fingerprint`. */
  fingerprint: string;
}

export interface StoredResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

export interface IdempotentOutcome extends StoredResponse {
  replayed: boolean;
}

/** Validates an Idempotency-Key header value; undefined when none was sent. */
export function checkIdempotencyKey(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const field = 'Idempotency-Key';
  if (Array.isArray(raw))
    throw invalid(field, 'Send one Idempotency-Key header, not several.', 'invalid_format');
  if (raw.length < 1 || raw.length > 255) {
    throw invalid(field, 'Idempotency-Key must be 1 to 255 characters.', 'range_error');
  }
  if (!KEY.test(raw)) {
    throw invalid(field, 'Idempotency-Key must contain printable ASCII characters only.', 'invalid_format');
  }
  return raw;
}

/** A stable hash of a request: object keys are sorted, so key order and whitespace do not matter. */
export function fingerprint(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const inProgress = () =>
  new DomainError(
    'idempotency_in_progress',
    'A request with this Idempotency-Key is still being processed; retry once it has finished.',
  );

export class IdempotencyService {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * Runs `work` once per (owner, key) within the retention time; repeats get the stored response.
   * `check`, when given, runs for the request that does the work only: after its claim, before and
   * outside the work's transaction (for checks that may take seconds, such as resolving a URL), its
   * result handed to `work`. A repeat is answered without it, so a rule or a DNS answer that changed
   * since cannot turn a replay into another answer; a check that fails releases the claim.
   */
  async execute<C = undefined>(
    claim: IdempotencyClaim,
    work: (tx: Tx, checked: C) => Promise<StoredResponse>,
    check?: () => Promise<C>,
  ): Promise<IdempotentOutcome> {
    // Each round either claims, decides, or saw the record change under it (released or taken over).
    for (let round = 0; round < 5; round++) {
      const now = this.deps.clock.now();
      const token = iso(now);
      if (await this.claim(claim, now)) return this.run(claim, token, work, check);
      const record = await this.db
        .selectFrom('idempotency_records')
        .selectAll()
        .where('owner_id', '=', claim.ownerId)
        .where('idem_key', '=', claim.key)
        .executeTakeFirst();
      if (!record) continue;
      const expired = record.expires_at <= token;
      const abandoned =
        record.state === 'in_progress' && now.getTime() - Date.parse(record.created_at) > IN_FLIGHT_LEASE_MS;
      if (expired || abandoned) {
        if (await this.takeOver(claim, record.created_at, now)) return this.run(claim, token, work, check);
        continue;
      }
      if (record.request_hash !== claim.fingerprint) {
        throw new DomainError(
          'idempotency_key_reused',
          'This Idempotency-Key was already used for a different request (another body or another endpoint).',
          [
            {
              field: 'Idempotency-Key',
              message: 'key reused for a different request',
              code: 'idempotency_key_reused',
            },
          ],
        );
      }
      if (record.state !== 'done') throw inProgress();
      return {
        replayed: true,
        status: record.response_status ?? 200,
        body: record.response_body === null ? null : JSON.parse(record.response_body),
        headers:
          record.response_headers === null
            ? {}
            : (JSON.parse(record.response_headers) as Record<string, string>),
      };
    }
    throw inProgress();
  }

  /** Deletes records past their retention; returns how many. The worker's purge job does this in batches. */
  async purgeExpired(): Promise<number> {
    const res = await this.db
      .deleteFrom('idempotency_records')
      .where('expires_at', '<=', iso(this.deps.clock.now()))
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }

  private get db() {
    return this.deps.store.db;
  }

  private async claim(claim: IdempotencyClaim, now: Date): Promise<boolean> {
    const res = await this.db
      .insertInto('idempotency_records')
      .values({ owner_id: claim.ownerId, idem_key: claim.key, ...claimedRow(claim, now) })
      .onConflict((oc) => oc.columns(['owner_id', 'idem_key']).doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  /** Compare-and-set on the old claim's created_at: of several racing take-overs, one wins. */
  private async takeOver(claim: IdempotencyClaim, previous: string, now: Date): Promise<boolean> {
    const res = await this.db
      .updateTable('idempotency_records')
      .set(claimedRow(claim, now))
      .where('owner_id', '=', claim.ownerId)
      .where('idem_key', '=', claim.key)
      .where('created_at', '=', previous)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  }

  private async run<C>(
    claim: IdempotencyClaim,
    token: string,
    work: (tx: Tx, checked: C) => Promise<StoredResponse>,
    check: (() => Promise<C>) | undefined,
  ): Promise<IdempotentOutcome> {
    try {
      const checked = check ? await check() : (undefined as C);
      return await inTransaction(this.deps, async (tx) => {
        const response = await work(tx, checked);
        const done = await tx.db
          .updateTable('idempotency_records')
          .set({
            state: 'done',
            response_status: response.status,
            response_body: JSON.stringify(response.body),
            response_headers: JSON.stringify(response.headers),
          })
          .where('owner_id', '=', claim.ownerId)
          .where('idem_key', '=', claim.key)
          .where('created_at', '=', token)
          .where('state', '=', 'in_progress')
          .executeTakeFirst();
        // The claim was taken over while this request worked: roll its work back.
        if (Number(done.numUpdatedRows) !== 1) throw inProgress();
        return { replayed: false, ...response };
      });
    } catch (err) {
      // Released even when the request was abandoned at its deadline: a retry must start afresh.
      await detachedFromRequest(() =>
        this.db
          .deleteFrom('idempotency_records')
          .where('owner_id', '=', claim.ownerId)
          .where('idem_key', '=', claim.key)
          .where('created_at', '=', token)
          .where('state', '=', 'in_progress')
          .execute(),
      ).catch(() => undefined);
      throw err;
    }
  }
}

/** A claim starting afresh: a new claim and a take-over must leave the same row behind. */
function claimedRow(claim: IdempotencyClaim, now: Date) {
  return {
    request_hash: claim.fingerprint,
    state: 'in_progress' as const,
    response_status: null,
    response_body: null,
    response_headers: null,
    created_at: iso(now),
    expires_at: iso(new Date(now.getTime() + IDEMPOTENCY_RETENTION_SECONDS * 1000)),
  };
}
