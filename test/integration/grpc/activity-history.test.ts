import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { testDialect } from '../../helpers/database.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import {
  metadataFor,
  startGrpcAtrium,
  unary,
  waitFor,
  type ActivityMessage,
  type grpc,
  type GrpcAtrium,
  type UserMessage,
} from './support.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * StreamUserActivity's history and the live part that follows it: "the user's last 20 events
 * (oldest first), then live ones". An outside tester found older events sent after the 20 when the
 * stream was opened right after a burst of changes (the live read's look-back window reached them).
 */
describe('gRPC StreamUserActivity: the last 20, then only what is new', () => {
  const gate = new StatementGate();
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  /**
   * A second instance on the same database. It writes while the stream's history read is held:
   * the held statement keeps this instance's connection (SQLite has one), not the database.
   */
  let elsewhere: Services;
  let dir: string | undefined;

  beforeAll(async () => {
    // Two instances need one database: a file for SQLite (memory databases are per connection).
    if (testDialect() === 'sqlite') dir = mkdtempSync(join(tmpdir(), 'atrium-grpc-'));
    atrium = await startGrpcAtrium(dir ? { DATABASE_URL: `sqlite:${join(dir, 'atrium.db')}` } : {}, {
      storePlugins: [gate],
    });
    elsewhere = await createServices(atrium.config);
    client = atrium.client();
  });
  afterAll(async () => {
    if (elsewhere) await closeServices(elsewhere);
    await atrium?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const rename = async (caller: { userId: string; headers: Record<string, string> }, name: string) => {
    const { error } = await unary<UserMessage>(
      client,
      'UpdateUser',
      { user_id: caller.userId, name, update_mask: { paths: ['name'] } },
      caller.headers,
    );
    if (error) throw error;
  };
  /**
   * The user's event ids in the store, oldest first, read through `services` (the other instance's
   * while the stream's history read holds this one's only SQLite connection).
   */
  const storedIds = async (userId: string, services: Services = atrium.services) =>
    (
      await services.store.db
        .selectFrom('events')
        .select('id')
        .where('owner_id', '=', userId)
        .orderBy('id', 'asc')
        .execute()
    ).map((r) => r.id);
  const open = (caller: { userId: string; headers: Record<string, string> }) => {
    const call = client.StreamUserActivity!(
      { user_id: caller.userId },
      metadataFor(caller.headers),
    ) as grpc.ClientReadableStream<ActivityMessage>;
    const ids: string[] = [];
    call.on('data', (e: ActivityMessage) => ids.push(e.metadata.event_id!));
    call.on('error', () => undefined);
    return { call, ids };
  };

  it('sends exactly the last 20 (oldest first) after a burst of 25 changes, then only new events, once each', async () => {
    const member = await atrium.caller({ role: 'member' });
    for (let i = 1; i <= 25; i++) await rename(member, `N${i}`);
    const stored = await storedIds(member.userId);
    expect(stored.length).toBeGreaterThanOrEqual(25);

    const { call, ids } = open(member);
    try {
      await waitFor(() => ids.length >= 20, 5_000, 'the 20 recent events');
      // More than one read of the outbox (every second): an older event would have come by now.
      await pause(1_500);
      expect(ids).toEqual(stored.slice(-20));

      await rename(member, 'N26');
      await waitFor(() => ids.length >= 21, 5_000, 'the live event');
      await pause(1_200);
      const after = await storedIds(member.userId);
      expect(ids).toEqual(after.slice(-21));
    } finally {
      call.cancel();
    }
  });

  it('delivers once each event committed between the history read and the live reads, a late commit with an older id too', async () => {
    const member = await atrium.caller({ role: 'member' });
    await rename(member, 'Before');
    const before = await storedIds(member.userId);

    // The history read runs, and its answer is held while others commit.
    const held = gate.hold('SelectQueryNode', 'events');
    const { call, ids } = open(member);
    try {
      await held.reached;
      // A change on another instance...
      await elsewhere.core.users.updateSelfService(
        { id: member.userId, kind: 'user', role: 'member' },
        member.userId,
        { name: 'During' },
      );
      // ...and one that instance committed late: its id and time are from 3 s ago, older than the
      // event the history read saw, but it was not there to be read.
      const lateMs = Date.now() - 3_000;
      const late = `evt_${lateMs.toString(16).padStart(12, '0')}${randomBytes(10).toString('hex')}`;
      await elsewhere.store.db
        .insertInto('events')
        .values({
          id: late,
          type: 'user.updated',
          api_version: '2026-11-28',
          owner_id: member.userId,
          data: JSON.stringify({ object: { id: member.userId }, changed: ['name'] }),
          created: Math.floor(lateMs / 1000),
          created_at: new Date(lateMs).toISOString(),
          dispatched_at: null,
        })
        .execute();
      const during = (await storedIds(member.userId, elsewhere)).filter(
        (id) => !before.includes(id) && id !== late,
      );
      expect(during).toHaveLength(1);
      held.release();

      await waitFor(() => ids.length >= before.length + 2, 5_000, 'the events committed meanwhile');
      await pause(1_500);
      expect(ids.slice(0, before.length)).toEqual(before);
      expect([...ids.slice(before.length)].sort()).toEqual([late, during[0]!].sort());
    } finally {
      held.release();
      call.cancel();
    }
  });
});
