import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { testDialect } from '../../helpers/database.js';
import {
  collect,
  grpc,
  handledMetrics,
  metadataFor,
  startGrpcAtrium,
  waitFor,
  type ActivityMessage,
  type GrpcAtrium,
} from './support.js';

const { status } = grpc;

describe('gRPC StreamUserActivity', () => {
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  let admin: Awaited<ReturnType<GrpcAtrium['caller']>>;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  /** A second instance on the same database: its changes reach streams here only through the store. */
  let elsewhere: Services;
  let dir: string | undefined;

  beforeAll(async () => {
    // Two instances need one database: a file for SQLite (memory databases are per connection).
    if (testDialect() === 'sqlite') dir = mkdtempSync(join(tmpdir(), 'atrium-grpc-'));
    atrium = await startGrpcAtrium(dir ? { DATABASE_URL: `sqlite:${join(dir, 'atrium.db')}` } : {});
    elsewhere = await createServices(atrium.config);
    client = atrium.client();
    admin = await atrium.caller({ role: 'admin' });
    member = await atrium.caller({ role: 'member' });
    await atrium.services.core.users.updateSelfService(
      { id: member.userId, kind: 'user', role: 'member' },
      member.userId,
      { name: 'Before Stream' },
    );
  });
  afterAll(async () => {
    if (elsewhere) await closeServices(elsewhere);
    await atrium?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sends recent events, then live ones from this instance and from another, until cancelled', async () => {
    const call = client.StreamUserActivity!(
      { user_id: member.userId },
      metadataFor(member.headers),
    ) as grpc.ClientReadableStream<ActivityMessage>;
    const events: ActivityMessage[] = [];
    let ended: grpc.StatusObject | undefined;
    call.on('data', (e: ActivityMessage) => events.push(e));
    call.on('error', () => undefined);
    call.on('status', (s) => (ended = s));

    await waitFor(() => events.length >= 1, 5_000, 'the recent event');
    expect(events[0]).toMatchObject({
      event_type: 'user.updated',
      metadata: { changed: 'name', object_id: member.userId },
    });
    expect(events[0]!.metadata.event_id).toMatch(/^evt_/);
    expect(Math.abs(events[0]!.timestamp - Date.now() / 1000)).toBeLessThan(60);

    // Live, through REST on this instance (an admin's PATCH).
    const patch = await fetch(`${atrium.httpUrl}/v1/users/${member.userId}`, {
      method: 'PATCH',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ email: `live-${member.userId}@example.com` }),
    });
    expect(patch.status).toBe(200);
    await waitFor(() => events.length >= 2, 5_000, 'the live event');
    expect(events[1]).toMatchObject({ event_type: 'user.updated', metadata: { changed: 'email' } });

    // Someone else's change is not this user's activity.
    await atrium.services.core.users.updateSelfService(
      { id: admin.userId, kind: 'user', role: 'admin' },
      admin.userId,
      { name: 'Not Streamed' },
    );

    // Live, from another instance: found in the shared event table by the next poll.
    await elsewhere.core.users.updateAsAdmin(SYSTEM_ACTOR, member.userId, { role: 'viewer' });
    await waitFor(() => events.length >= 3, 5_000, 'the event from another instance');
    expect(events[2]).toMatchObject({ event_type: 'user.updated', metadata: { changed: 'role' } });
    expect(new Set(events.map((e) => e.metadata.event_id)).size).toBe(events.length);

    call.cancel();
    await waitFor(() => ended !== undefined, 5_000, 'the end of the stream');
    expect(ended?.code).toBe(status.CANCELLED);
    await new Promise((r) => setTimeout(r, 200));
    expect(events).toHaveLength(3);
  });

  it('ends with DEADLINE_EXCEEDED when the deadline passes', async () => {
    const started = Date.now();
    const { messages, error } = await collect<ActivityMessage>(
      client,
      'StreamUserActivity',
      { user_id: member.userId },
      member.headers,
      { deadline: Date.now() + 600 },
    );
    expect(error?.code).toBe(status.DEADLINE_EXCEEDED);
    expect(messages.length).toBeGreaterThanOrEqual(3);
    expect(Date.now() - started).toBeLessThan(3_000);
    const metrics = await handledMetrics(atrium, 'StreamUserActivity', 'DEADLINE_EXCEEDED');
    expect(metrics).toMatch(
      /atrium_grpc_server_handled_total\{[^}]*grpc_method="StreamUserActivity"[^}]*grpc_code="DEADLINE_EXCEEDED"[^}]*\} 1/,
    );
  });

  it('follows the read rule: the user themself or an admin', async () => {
    const other = await atrium.caller({ role: 'member' });
    const denied = await collect(client, 'StreamUserActivity', { user_id: member.userId }, other.headers);
    expect(denied.error?.code).toBe(status.PERMISSION_DENIED);
    expect(denied.messages).toEqual([]);
    const asAdmin = await collect<ActivityMessage>(
      client,
      'StreamUserActivity',
      { user_id: member.userId },
      admin.headers,
      {
        deadline: Date.now() + 500,
      },
    );
    expect(asAdmin.messages.length).toBeGreaterThanOrEqual(3);
  });

  it.each([
    ['on this instance', () => atrium.services],
    ['by another process (atrium users delete)', () => elsewhere],
  ])('ends with NOT_FOUND when the user is deleted %s, after the events before it', async (_where, by) => {
    const doomed = await atrium.caller({ role: 'member' });
    await atrium.services.core.users.updateSelfService(
      { id: doomed.userId, kind: 'user', role: 'member' },
      doomed.userId,
      { name: 'Soon Gone' },
    );
    const events: ActivityMessage[] = [];
    const call = client.StreamUserActivity!(
      { user_id: doomed.userId },
      metadataFor(admin.headers),
    ) as grpc.ClientReadableStream<ActivityMessage>;
    let ended: grpc.StatusObject | undefined;
    call.on('data', (e: ActivityMessage) => events.push(e));
    call.on('error', () => undefined);
    call.on('status', (s) => (ended = s));
    await waitFor(() => events.length >= 1, 5_000, 'the recent event');
    await new Promise((r) => setTimeout(r, 100));
    expect(ended).toBeUndefined();

    await by().core.users.delete(SYSTEM_ACTOR, doomed.userId);
    await waitFor(() => ended !== undefined, 5_000, 'the end of the stream');
    expect(ended?.code).toBe(status.NOT_FOUND);
    expect(ended?.details).toMatch(/User/);
    expect(events).toHaveLength(1);
  });

  it('ends with PERMISSION_DENIED, sending nothing more, when the admin following someone is demoted', async () => {
    const watched = await atrium.caller({ role: 'member' });
    const watcher = await atrium.caller({ role: 'admin' });
    await atrium.services.core.users.updateSelfService(
      { id: watched.userId, kind: 'user', role: 'member' },
      watched.userId,
      { name: 'Watched By Admin' },
    );
    const events: ActivityMessage[] = [];
    const call = client.StreamUserActivity!(
      { user_id: watched.userId },
      metadataFor(watcher.headers),
    ) as grpc.ClientReadableStream<ActivityMessage>;
    let ended: grpc.StatusObject | undefined;
    call.on('data', (e: ActivityMessage) => events.push(e));
    call.on('error', () => undefined);
    call.on('status', (s) => (ended = s));
    await waitFor(() => events.length >= 1, 5_000, 'the recent event');

    // Demoted by another instance, then the watched user changes: that change is not theirs to see.
    await elsewhere.core.users.updateAsAdmin(SYSTEM_ACTOR, watcher.userId, { role: 'member' });
    await elsewhere.core.users.updateAsAdmin(SYSTEM_ACTOR, watched.userId, { name: 'Secret Name' });
    await waitFor(() => ended !== undefined, 5_000, 'the end of the stream');
    expect(ended?.code).toBe(status.PERMISSION_DENIED);
    expect(events).toHaveLength(1);
  });

  it('ends with UNAUTHENTICATED when the key it was opened with is revoked, by another instance too', async () => {
    const watcher = await atrium.caller({ role: 'member' });
    await atrium.services.core.users.updateSelfService(
      { id: watcher.userId, kind: 'user', role: 'member' },
      watcher.userId,
      { name: 'Watched Once' },
    );
    const events: ActivityMessage[] = [];
    const call = client.StreamUserActivity!(
      { user_id: watcher.userId },
      metadataFor(watcher.headers),
    ) as grpc.ClientReadableStream<ActivityMessage>;
    let ended: grpc.StatusObject | undefined;
    call.on('data', (e: ActivityMessage) => events.push(e));
    call.on('error', () => undefined);
    call.on('status', (s) => (ended = s));
    await waitFor(() => events.length >= 1, 5_000, 'the recent event');

    await elsewhere.apiKeys.revoke(watcher.keyId);
    await elsewhere.core.users.updateAsAdmin(SYSTEM_ACTOR, watcher.userId, { role: 'viewer' });
    await waitFor(() => ended !== undefined, 5_000, 'the end of the stream');
    expect(ended?.code).toBe(status.UNAUTHENTICATED);
    expect(events).toHaveLength(1);
  });

  it('refuses an empty id, an unknown user and a call without credentials', async () => {
    expect((await collect(client, 'StreamUserActivity', { user_id: '' }, admin.headers)).error?.code).toBe(
      status.INVALID_ARGUMENT,
    );
    expect(
      (
        await collect(
          client,
          'StreamUserActivity',
          { user_id: 'usr_00000000000000000000000000' },
          admin.headers,
        )
      ).error?.code,
    ).toBe(status.NOT_FOUND);
    expect((await collect(client, 'StreamUserActivity', { user_id: member.userId })).error?.code).toBe(
      status.UNAUTHENTICATED,
    );
  });
});
