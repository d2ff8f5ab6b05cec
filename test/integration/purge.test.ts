import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/clock.js';
import { PurgeJob } from '../../src/maintenance/purge.js';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';

const T = Date.parse('2026-11-20T12:00:00.000Z');
const at = (offsetMs: number) => new Date(T + offsetMs).toISOString();
const SECOND = 1000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;

/** Issue 10 item 5: nothing grows forever. Each kind goes when due; what must stay stays. */
describe('the purge job', () => {
  const clock: Clock = { now: () => new Date(T) };
  let atrium: TestAtrium;
  let userId: string;
  let clientId: string;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { clock });
    userId = (await atrium.caller()).userId;
    const client = await atrium.services.oauth.clients.create({
      name: 'App',
      redirectUris: ['https://app.example.com/cb'],
      firstParty: true,
    });
    clientId = client.client_id;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  const db = () => atrium.services.store.db;
  const job = (options: { batchSize?: number; maxBatches?: number } = {}) =>
    new PurgeJob(atrium.services, options);

  async function idempotency(key: string, expiresAt: string): Promise<void> {
    await db()
      .insertInto('idempotency_records')
      .values({
        owner_id: userId,
        idem_key: key,
        request_hash: 'h',
        state: 'done',
        response_status: 201,
        response_body: '{}',
        response_headers: '{}',
        created_at: at(-DAY),
        expires_at: expiresAt,
      })
      .execute();
  }

  async function code(id: string, expiresAt: string, usedAt: string | null): Promise<void> {
    await db()
      .insertInto('authorization_codes')
      .values({
        id,
        code_hash: `hash-${id}`,
        client_id: clientId,
        user_id: userId,
        redirect_uri: 'https://app.example.com/cb',
        scope: 'profile:read',
        code_challenge: 'c',
        expires_at: expiresAt,
        used_at: usedAt,
        family_id: null,
        created_at: at(-2 * DAY),
      })
      .execute();
  }

  async function family(id: string, createdAt: string, revokedAt: string | null): Promise<void> {
    await db()
      .insertInto('refresh_token_families')
      .values({
        id,
        client_id: clientId,
        subject: userId,
        scope: 'profile:read',
        authorization_code_id: null,
        revoked_at: revokedAt,
        revoked_reason: revokedAt === null ? null : 'reused',
        created_at: createdAt,
      })
      .execute();
  }

  async function token(id: string, familyId: string, status: 'current' | 'used', expiresAt: string) {
    await db()
      .insertInto('refresh_tokens')
      .values({
        id,
        family_id: familyId,
        token_hash: `hash-${id}`,
        status,
        expires_at: expiresAt,
        created_at: at(-40 * DAY),
        used_at: status === 'used' ? at(-DAY) : null,
      })
      .execute();
  }

  const ids = async (table: 'authorization_codes' | 'refresh_token_families' | 'refresh_tokens') =>
    (await db().selectFrom(table).select('id').orderBy('id').execute()).map((r) => r.id);
  const keys = async () =>
    (await db().selectFrom('idempotency_records').select('idem_key').orderBy('idem_key').execute()).map(
      (r) => r.idem_key,
    );

  it('deletes each kind when it is due and keeps what is still needed', async () => {
    // Idempotency records: replayable until expires_at (created + 24 h).
    await idempotency('expired-1', at(-SECOND));
    await idempotency('expired-2', at(-HOUR));
    await idempotency('expired-3', at(-DAY));
    await idempotency('live', at(HOUR));
    // Authorization codes: an unused one goes at expiry; a used one a day later (a replay still
    // revokes what it issued).
    await code('acd_unused_expired', at(-SECOND), null);
    await code('acd_unused_live', at(30 * SECOND), null);
    await code('acd_used_recent', at(-HOUR), at(-2 * HOUR));
    await code('acd_used_old', at(-DAY - SECOND), at(-DAY - HOUR));
    // Refresh families and tokens.
    await family('rtf_revoked_old', at(-60 * DAY), at(-30 * DAY - SECOND)); // past its lifetime
    await token('rtk_of_revoked_old', 'rtf_revoked_old', 'current', at(-HOUR)); // goes with it
    await family('rtf_revoked_recent', at(-10 * DAY), at(-DAY)); // still answers "revoked"
    await token('rtk_used_expired', 'rtf_revoked_recent', 'used', at(-DAY - SECOND));
    await token('rtk_used_live', 'rtf_revoked_recent', 'used', at(10 * DAY)); // reuse detection
    await family('rtf_abandoned', at(-40 * DAY), null); // nobody refreshed it for 30 days
    await token('rtk_abandoned', 'rtf_abandoned', 'current', at(-10 * DAY));
    await family('rtf_active', at(-40 * DAY), null); // old but refreshed lately
    await token('rtk_active', 'rtf_active', 'current', at(5 * DAY));

    // Used login tickets: kept while the ticket itself would still verify.
    for (const [id, expiresAt] of [
      ['ticket_expired_1xxxxxxxx', at(-SECOND)],
      ['ticket_expired_2xxxxxxxx', at(-HOUR)],
      ['ticket_live_xxxxxxxxxxxx', at(5 * 60 * SECOND)],
    ] as const)
      await db().insertInto('used_login_tickets').values({ ticket_id: id, expires_at: expiresAt }).execute();

    // Batches of two, so a kind with three due rows takes two statements.
    const counts = await job({ batchSize: 2 }).runOnce();
    expect(counts).toEqual({
      idempotency_records: 3,
      authorization_codes: 2,
      used_login_tickets: 2,
      refresh_tokens: 2,
      refresh_token_families: 2,
    });
    expect(await keys()).toEqual(['live']);
    expect(await ids('authorization_codes')).toEqual(['acd_unused_live', 'acd_used_recent']);
    expect(await ids('refresh_token_families')).toEqual(['rtf_active', 'rtf_revoked_recent']);
    expect(await ids('refresh_tokens')).toEqual(['rtk_active', 'rtk_used_live']);
    const tickets = await db().selectFrom('used_login_tickets').select('ticket_id').execute();
    expect(tickets.map((t) => t.ticket_id)).toEqual(['ticket_live_xxxxxxxxxxxx']);

    // The purge answers in /metrics, the same registry as the HTTP metrics.
    const metrics = (await atrium.http!.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('atrium_purged_rows_total{kind="idempotency_records"} 3');
    expect(metrics).toContain('atrium_purged_rows_total{kind="authorization_codes"} 2');
    expect(metrics).toContain('atrium_purged_rows_total{kind="used_login_tickets"} 2');
    expect(metrics).toContain('atrium_purged_rows_total{kind="refresh_tokens"} 2');
    expect(metrics).toContain('atrium_purged_rows_total{kind="refresh_token_families"} 2');
    expect(metrics).toContain('atrium_http_requests_total');

    // A second run finds nothing more.
    expect(await job().runOnce()).toEqual({
      idempotency_records: 0,
      authorization_codes: 0,
      used_login_tickets: 0,
      refresh_tokens: 0,
      refresh_token_families: 0,
    });
  });

  it('a run is bounded: at most maxBatches × batchSize rows of a kind, the rest next time', async () => {
    for (const k of ['b-1', 'b-2', 'b-3']) await idempotency(k, at(-SECOND));
    const first = await job({ batchSize: 1, maxBatches: 2 }).runOnce();
    expect(first.idempotency_records).toBe(2);
    expect((await keys()).filter((k) => k.startsWith('b-'))).toHaveLength(1);
    const second = await job({ batchSize: 1, maxBatches: 2 }).runOnce();
    expect(second.idempotency_records).toBe(1);
    expect((await keys()).filter((k) => k.startsWith('b-'))).toEqual([]);
  });

  it('runs in the worker role only, and stops with the process', async () => {
    const worker = await startTestAtrium({}, ['worker']);
    const api = await startTestAtrium({}, ['api']);
    try {
      // Every role answers health and metrics over HTTP; a worker serves no API routes.
      expect(worker.http!.hasRoute({ method: 'GET', url: '/api/v2/orders' })).toBe(false);
      expect(api.http!.hasRoute({ method: 'GET', url: '/api/v2/orders' })).toBe(true);
      expect(await worker.services.metrics.getSingleMetricAsString('atrium_purged_rows_total')).toContain(
        'kind="refresh_tokens"',
      );
      expect(api.services.metrics.getSingleMetric('atrium_purged_rows_total')).toBeUndefined();
    } finally {
      await worker.stop();
      await api.stop();
    }
  });
});
