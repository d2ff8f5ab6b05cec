import { sql } from 'kysely';
import { iso } from '../domain/clock.js';
import { newId } from '../domain/ids.js';
import type { Store } from '../store/store.js';
import { subscribes } from './endpoints.js';
import type { StoredEvent } from './event-types.js';

/** A delivery this worker now holds for one attempt. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  /** The attempt number being made now (1-based, within `round`). */
  attempt: number;
  round: number;
  /** The previous claim's attempt never recorded an outcome: its worker died mid-flight. */
  interrupted: boolean;
  event: StoredEvent & { created_at: string };
  endpoint: {
    url: string;
    secret: string;
    previous_secret: string | null;
    previous_secret_expires_at: string | null;
    disabled_at: string | null;
  };
}

export interface AttemptRecord {
  attempt: number;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseExcerpt: string | null;
  at: Date;
}

/** The outcome of one claim, written in one transaction with the others of its batch. */
export interface Completion {
  delivery: ClaimedDelivery;
  records: AttemptRecord[];
  status: 'pending' | 'delivered' | 'failed';
  attemptCount: number;
  nextAttemptAt: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  disableEndpoint: string | null;
}

/** A claimed delivery row with its event and endpoint, as the claim statement returns it. */
interface ClaimRow {
  id: string;
  endpoint_id: string;
  attempt_count: number;
  round: number;
  stale: string | null;
  event_id: string;
  type: string;
  api_version: string;
  created: number;
  event_created_at: string;
  data: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  disabled_at: string | null;
}

const FAN_OUT_BATCH = 500;
const INSERT_CHUNK = 200;

/**
 * The outbox and the delivery schedule, all in the database: events written by changes are fanned
 * out into one delivery row per subscribed endpoint, and each delivery carries its own schedule
 * (`next_attempt_at`, `attempt_count`). A claim bumps the attempt number and pushes
 * `next_attempt_at` to the end of a lease before anything is sent, so no two workers make the same
 * attempt and a worker that dies mid-attempt leaves a row that becomes due again when the lease
 * ends, as the next attempt of the same sequence.
 */
export class Outbox {
  constructor(private readonly store: Store) {}

  /** Turns undispatched events into deliveries; returns how many events it handled. */
  async fanOut(now: Date): Promise<number> {
    const postgres = this.store.dialect === 'postgres';
    return this.store.db.transaction().execute(async (trx) => {
      let q = trx
        .selectFrom('events')
        .select(['id', 'type', 'owner_id', 'target_endpoint_id', 'created_at'])
        .where('dispatched_at', 'is', null)
        .orderBy('id')
        .limit(FAN_OUT_BATCH);
      if (postgres) q = q.forUpdate().skipLocked();
      const events = await q.execute();
      if (events.length === 0) return 0;
      const owners = [...new Set(events.map((e) => e.owner_id).filter((o): o is string => o !== null))];
      // On PostgreSQL the endpoints read are locked FOR KEY SHARE (the lock the deliveries' foreign
      // key check takes anyway) until the deliveries are written: a DELETE of one waits for this
      // commit and then takes its new deliveries with it, and one already under way is waited for
      // and its endpoint skipped. Unlocked, a DELETE committed in between failed the insert on the
      // foreign key and rolled back the whole batch. PATCHes, rotations and 410 disabling lock FOR
      // NO KEY UPDATE, which does not conflict. SQLite: this is the only writer (BEGIN IMMEDIATE).
      let endpointsQuery = trx
        .selectFrom('webhook_endpoints')
        .select(['id', 'user_id', 'events', 'created_at'])
        .where('user_id', 'in', owners)
        .where('disabled_at', 'is', null);
      if (postgres) endpointsQuery = endpointsQuery.forKeyShare();
      const endpoints = owners.length === 0 ? [] : await endpointsQuery.execute();
      const byOwner = new Map<string, Array<{ id: string; events: string[]; createdAt: string }>>();
      for (const e of endpoints) {
        const list = byOwner.get(e.user_id) ?? [];
        list.push({ id: e.id, events: JSON.parse(e.events) as string[], createdAt: e.created_at });
        byOwner.set(e.user_id, list);
      }
      const at = iso(now);
      const rows = events.flatMap((event) => {
        const mine = event.owner_id === null ? [] : (byOwner.get(event.owner_id) ?? []);
        // An event goes to the endpoints that existed when it happened (as Stripe and Svix send
        // them), not to one registered while it waited in the outbox, say through a worker outage.
        const targets = event.target_endpoint_id
          ? mine.filter((e) => e.id === event.target_endpoint_id)
          : mine.filter((e) => e.createdAt <= event.created_at && subscribes(e.events, event.type));
        return targets.map((endpoint) => ({
          id: newId('dlv', now.getTime()),
          event_id: event.id,
          endpoint_id: endpoint.id,
          status: 'pending' as const,
          attempt_count: 0,
          next_attempt_at: at,
          locked_until: null,
          last_status_code: null,
          last_error: null,
          created_at: at,
          updated_at: at,
        }));
      });
      for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
        await trx
          .insertInto('webhook_deliveries')
          .values(rows.slice(i, i + INSERT_CHUNK))
          .onConflict((oc) => oc.columns(['event_id', 'endpoint_id']).doNothing())
          .execute();
      }
      await trx
        .updateTable('events')
        .set({ dispatched_at: at })
        .where(
          'id',
          'in',
          events.map((e) => e.id),
        )
        .execute();
      return events.length;
    });
  }

  /** Takes up to `limit` due deliveries for one attempt each, holding them until `leaseUntil`. */
  async claim(now: Date, limit: number, leaseUntil: Date): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const rows =
      this.store.dialect === 'postgres'
        ? await this.claimPostgres(now, limit, leaseUntil)
        : await this.claimSqlite(now, limit, leaseUntil);
    return rows.map((d) => ({
      id: d.id,
      endpointId: d.endpoint_id,
      attempt: Number(d.attempt_count),
      round: Number(d.round),
      interrupted: d.stale !== null,
      event: {
        id: d.event_id,
        type: d.type,
        api_version: d.api_version,
        created: Number(d.created),
        data: d.data,
        created_at: d.event_created_at,
      },
      endpoint: {
        url: d.url,
        secret: d.secret,
        previous_secret: d.previous_secret,
        previous_secret_expires_at: d.previous_secret_expires_at,
        disabled_at: d.disabled_at,
      },
    }));
  }

  /**
   * One statement, one round trip: the due rows are locked, skipped by concurrent claimers, moved
   * past `now` before the lock is released (so a second worker can never take the same attempt),
   * and returned with their event and endpoint.
   */
  private async claimPostgres(now: Date, limit: number, leaseUntil: Date): Promise<ClaimRow[]> {
    const at = iso(now);
    const lease = iso(leaseUntil);
    const result = await sql<ClaimRow>`
      WITH due AS (
        SELECT id, locked_until FROM webhook_deliveries
        WHERE status = 'pending' AND next_attempt_at <= ${at}
        ORDER BY next_attempt_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), claimed AS (
        UPDATE webhook_deliveries AS d
        SET attempt_count = d.attempt_count + 1, locked_until = ${lease}, next_attempt_at = ${lease},
            updated_at = ${at}
        FROM due WHERE d.id = due.id
        RETURNING d.id, d.endpoint_id, d.event_id, d.attempt_count, d.round, due.locked_until AS stale
      )
      SELECT c.id, c.endpoint_id, c.attempt_count, c.round, c.stale,
             e.id AS event_id, e.type, e.api_version, e.created, e.created_at AS event_created_at, e.data,
             w.url, w.secret, w.previous_secret, w.previous_secret_expires_at, w.disabled_at
      FROM claimed c
      JOIN events e ON e.id = c.event_id
      JOIN webhook_endpoints w ON w.id = c.endpoint_id`.execute(this.store.db);
    return result.rows;
  }

  /** SQLite: one connection, one writer; the transaction makes select-and-bump atomic. */
  private async claimSqlite(now: Date, limit: number, leaseUntil: Date): Promise<ClaimRow[]> {
    const at = iso(now);
    const lease = iso(leaseUntil);
    return this.store.db.transaction().execute(async (trx) => {
      const due = await trx
        .selectFrom('webhook_deliveries as d')
        .innerJoin('events as e', 'e.id', 'd.event_id')
        .innerJoin('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
        .select([
          'd.id as id',
          'd.endpoint_id as endpoint_id',
          'd.attempt_count as attempt_count',
          'd.round as round',
          'd.locked_until as stale',
          'e.id as event_id',
          'e.type as type',
          'e.api_version as api_version',
          'e.created as created',
          'e.created_at as event_created_at',
          'e.data as data',
          'w.url as url',
          'w.secret as secret',
          'w.previous_secret as previous_secret',
          'w.previous_secret_expires_at as previous_secret_expires_at',
          'w.disabled_at as disabled_at',
        ])
        .where('d.status', '=', 'pending')
        .where('d.next_attempt_at', '<=', at)
        .orderBy('d.next_attempt_at')
        .limit(limit)
        .execute();
      if (due.length === 0) return [];
      await trx
        .updateTable('webhook_deliveries')
        .set((eb) => ({
          attempt_count: eb('attempt_count', '+', 1),
          locked_until: lease,
          next_attempt_at: lease,
          updated_at: at,
        }))
        .where(
          'id',
          'in',
          due.map((d) => d.id),
        )
        .execute();
      return due.map((d) => ({ ...d, attempt_count: d.attempt_count + 1 }));
    });
  }

  /** Records outcomes: attempt rows, the delivery's next state, a 410's disabling, atomically. */
  async complete(completions: Completion[], now: Date): Promise<void> {
    if (completions.length === 0) return;
    if (this.store.dialect === 'postgres') await this.completePostgres(completions, now);
    else await this.completeSqlite(completions, now);
  }

  /**
   * The whole batch in one statement (so one round trip and one commit): the CTEs lock the
   * deliveries still there, insert their attempt records, move each to its next state and disable
   * the endpoints a 410 asked to disable. An endpoint deleted while its attempt was in flight took
   * the delivery with it; that outcome has nowhere to go and is dropped without failing the batch,
   * and the key-share lock keeps the rest from being deleted until this commits. The state update
   * is guarded by the claim's numbers: if this worker's lease ran out and another took the
   * delivery, the newer claim owns the row and this outcome stays only an attempt record.
   */
  private async completePostgres(completions: Completion[], now: Date): Promise<void> {
    const at = iso(now);
    const states = sql.join(
      completions.map(
        (c) =>
          sql`(${c.delivery.id}::text, ${c.status}::text, ${c.attemptCount}::int,
            ${c.nextAttemptAt === null ? null : iso(c.nextAttemptAt)}::text, ${c.lastStatusCode}::int,
            ${c.lastError}::text, ${c.delivery.attempt}::int, ${c.delivery.round}::int,
            ${c.delivery.endpointId}::text, ${c.disableEndpoint}::text)`,
      ),
    );
    const attemptRows = completions.flatMap((c) =>
      c.records.map(
        (r) =>
          sql`(${newId('att', r.at.getTime())}::text, ${c.delivery.id}::text, ${r.attempt}::int,
            ${c.delivery.round}::int, ${r.statusCode}::int, ${Math.round(r.durationMs)}::int,
            ${r.error}::text, ${r.responseExcerpt}::text, ${iso(r.at)}::text)`,
      ),
    );
    // A completion without a record (a disabled endpoint: nothing was sent) adds no attempt row.
    const recorded =
      attemptRows.length === 0
        ? sql``
        : sql`recorded AS (
            INSERT INTO delivery_attempts
              (id, delivery_id, attempt, round, status_code, duration_ms, error, response_excerpt, created_at)
            SELECT a.* FROM (VALUES ${sql.join(attemptRows)})
              AS a(id, delivery_id, attempt, round, status_code, duration_ms, error, response_excerpt, created_at)
            WHERE a.delivery_id IN (SELECT id FROM alive)
          ),`;
    await sql`
      WITH v(id, status, attempt_count, next_attempt_at, last_status_code, last_error, claim_attempt,
             claim_round, endpoint_id, disable_reason) AS (VALUES ${states}),
      alive AS (
        SELECT d.id FROM webhook_deliveries d JOIN v ON v.id = d.id FOR KEY SHARE OF d
      ),
      ${recorded}
      moved AS (
        UPDATE webhook_deliveries AS d
        SET status = v.status, attempt_count = v.attempt_count, next_attempt_at = v.next_attempt_at,
            locked_until = NULL, last_status_code = v.last_status_code, last_error = v.last_error,
            updated_at = ${at}
        FROM v
        WHERE d.id = v.id AND d.attempt_count = v.claim_attempt AND d.round = v.claim_round
          AND d.id IN (SELECT id FROM alive)
      )
      UPDATE webhook_endpoints AS w
      SET disabled_at = ${at}, disabled_reason = v.disable_reason, updated_at = ${at}
      FROM v
      WHERE v.disable_reason IS NOT NULL AND w.id = v.endpoint_id AND w.disabled_at IS NULL
        AND v.id IN (SELECT id FROM alive)`.execute(this.store.db);
  }

  private async completeSqlite(completions: Completion[], now: Date): Promise<void> {
    const at = iso(now);
    await this.store.db.transaction().execute(async (trx) => {
      // One writer: nothing can delete between this read and the writes below.
      const alive = new Set(
        (
          await trx
            .selectFrom('webhook_deliveries')
            .select('id')
            .where(
              'id',
              'in',
              completions.map((c) => c.delivery.id),
            )
            .execute()
        ).map((r) => r.id),
      );
      completions = completions.filter((c) => alive.has(c.delivery.id));
      if (completions.length === 0) return;
      const attempts = completions.flatMap((c) =>
        c.records.map((r) => ({
          id: newId('att', r.at.getTime()),
          delivery_id: c.delivery.id,
          attempt: r.attempt,
          round: c.delivery.round,
          status_code: r.statusCode,
          duration_ms: Math.round(r.durationMs),
          error: r.error,
          response_excerpt: r.responseExcerpt,
          created_at: iso(r.at),
        })),
      );
      for (let i = 0; i < attempts.length; i += INSERT_CHUNK) {
        await trx
          .insertInto('delivery_attempts')
          .values(attempts.slice(i, i + INSERT_CHUNK))
          .execute();
      }
      for (const c of completions) {
        await trx
          .updateTable('webhook_deliveries')
          .set({
            status: c.status,
            attempt_count: c.attemptCount,
            next_attempt_at: c.nextAttemptAt === null ? null : iso(c.nextAttemptAt),
            locked_until: null,
            last_status_code: c.lastStatusCode,
            last_error: c.lastError,
            updated_at: at,
          })
          .where('id', '=', c.delivery.id)
          .where('attempt_count', '=', c.delivery.attempt)
          .where('round', '=', c.delivery.round)
          .execute();
        if (c.disableEndpoint !== null) {
          await trx
            .updateTable('webhook_endpoints')
            .set({ disabled_at: at, disabled_reason: c.disableEndpoint, updated_at: at })
            .where('id', '=', c.delivery.endpointId)
            .where('disabled_at', 'is', null)
            .execute();
        }
      }
    });
  }

  /**
   * SQLite has one serving process, so at its start every lease belongs to a process that is gone:
   * those deliveries are due now rather than when the lease would have ended.
   */
  async releaseAbandonedLeases(now: Date): Promise<number> {
    const result = await this.store.db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: iso(now) })
      .where('status', '=', 'pending')
      .where('locked_until', 'is not', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** When the next pending delivery is due, or null when none is. */
  async nextDueAt(): Promise<Date | null> {
    const row = await this.store.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('next'))
      .where('status', '=', 'pending')
      .executeTakeFirst();
    const next = row?.next as string | null | undefined;
    return next ? new Date(next) : null;
  }

  async hasUndispatched(): Promise<boolean> {
    const row = await this.store.db
      .selectFrom('events')
      .select('id')
      .where('dispatched_at', 'is', null)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Deletes events dispatched before `cutoff` whose deliveries are all finished (delivered or
   * failed), with their deliveries and attempt records. Returns how many events went.
   */
  async purge(cutoff: Date, batch = 1000): Promise<number> {
    const db = this.store.db;
    const ids = await db
      .selectFrom('events')
      .select('id')
      .where('dispatched_at', 'is not', null)
      .where('dispatched_at', '<', iso(cutoff))
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('webhook_deliveries as d')
              .select('d.id')
              .whereRef('d.event_id', '=', 'events.id')
              .where('d.status', '=', 'pending'),
          ),
        ),
      )
      .limit(batch)
      .execute();
    if (ids.length === 0) return 0;
    await db
      .deleteFrom('events')
      .where(
        'id',
        'in',
        ids.map((r) => r.id),
      )
      .execute();
    return ids.length;
  }
}
