import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { newId } from '../../../src/domain/ids.js';
import type { Role } from '../../../src/store/types.js';
import { LIST_PAGE_SIZE } from '../../../src/grpc/user-service.js';
import {
  collect,
  grpc,
  metadataFor,
  richStatus,
  startGrpcAtrium,
  waitFor,
  type GrpcAtrium,
  type UserMessage,
} from './support.js';

const { status } = grpc;
const USERS = 1_200;

describe('gRPC ListUsers: a server stream', () => {
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  let admin: Awaited<ReturnType<GrpcAtrium['caller']>>;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  /** Every live user, in id order, as the store has them. */
  let all: { id: string; role: Role }[];
  let pageCalls = 0;

  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    client = atrium.client();
    admin = await atrium.caller({ role: 'admin' });
    member = await atrium.caller({ role: 'member' });
    // Enough users, with long names, that a whole listing is far larger than HTTP/2's flow-control window.
    const org = await atrium.services.core.organizations.create({ name: 'Listing' });
    const now = new Date().toISOString();
    const roles: Role[] = ['viewer', 'member', 'admin'];
    const rows = Array.from({ length: USERS }, (_, i) => {
      const handle = `list${i.toString().padStart(5, '0')}`;
      return {
        id: newId('usr'),
        organization_id: org.id,
        handle,
        email: `${handle}@example.com`,
        first_name: 'F'.repeat(60),
        last_name: `L${i}`.padEnd(39, 'x'),
        role: roles[i % 3]!,
        password_hash: null,
        email_verified_at: null,
        created_at: now,
        updated_at: now,
        deleted_at: null,
      };
    });
    for (let i = 0; i < rows.length; i += 200) {
      await atrium.services.store.db
        .insertInto('users')
        .values(rows.slice(i, i + 200))
        .execute();
    }
    all = (
      await atrium.services.store.db
        .selectFrom('users')
        .select(['id', 'role'])
        .where('deleted_at', 'is', null)
        .orderBy('id')
        .execute()
    ).map((r) => ({ id: r.id, role: r.role }));
    // Observes (does not replace) the core's page reads, to see how far the server has read ahead.
    const users = atrium.services.core.users;
    const page = users.page.bind(users);
    users.page = (viewer, query) => {
      pageCalls += 1;
      return page(viewer, query);
    };
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  /** A ListUsers stream whose client stops reading after the first user, until `resume()`. */
  async function pausedAfterFirst(headers: Record<string, string>) {
    const call = client.ListUsers!({}, metadataFor(headers)) as grpc.ClientReadableStream<UserMessage>;
    const stream = { call, received: [] as UserMessage[], ended: undefined as grpc.StatusObject | undefined };
    call.on('status', (s) => (stream.ended = s));
    call.on('error', () => undefined);
    call.on('data', (m: UserMessage) => {
      stream.received.push(m);
      if (stream.received.length === 1) call.pause();
    });
    await waitFor(() => stream.received.length >= 1, 5_000, 'the first user');
    return stream;
  }

  it('streams every user in id order, and only admins and the user themself see an email', async () => {
    const { messages, status: end } = await collect<UserMessage>(client, 'ListUsers', {}, member.headers);
    expect(end?.code).toBe(status.OK);
    expect(messages.map((m) => m.id)).toEqual(all.map((u) => u.id));
    for (const m of messages) expect(m.email === '').toBe(m.id !== member.userId);
    const asAdmin = await collect<UserMessage>(client, 'ListUsers', { limit: 5 }, admin.headers);
    expect(asAdmin.messages.every((m) => m.email.endsWith('@example.com'))).toBe(true);
  });

  it("names a user's organization only to its members and admins (D19), as GraphQL and REST do", async () => {
    const orgOf = new Map(
      (await atrium.services.store.db.selectFrom('users').select(['id', 'organization_id']).execute()).map(
        (r) => [r.id, r.organization_id],
      ),
    );
    const own = orgOf.get(member.userId)!;
    const { messages } = await collect<UserMessage>(client, 'ListUsers', {}, member.headers);
    expect(messages.filter((m) => orgOf.get(m.id) !== own).length).toBeGreaterThanOrEqual(USERS);
    for (const m of messages) expect(m.organization_id, m.id).toBe(orgOf.get(m.id) === own ? own : '');
    const asAdmin = await collect<UserMessage>(client, 'ListUsers', {}, admin.headers);
    for (const m of asAdmin.messages) expect(m.organization_id, m.id).toBe(orgOf.get(m.id));
  });

  it('filters by role when role is non-empty', async () => {
    const { messages } = await collect<UserMessage>(client, 'ListUsers', { role: 'viewer' }, member.headers);
    expect(messages.map((m) => m.id)).toEqual(all.filter((u) => u.role === 'viewer').map((u) => u.id));
    expect(messages.every((m) => m.role === 'viewer')).toBe(true);
  });

  it('stops after limit users when limit is above zero', async () => {
    const { messages, status: end } = await collect<UserMessage>(
      client,
      'ListUsers',
      { limit: 7 },
      member.headers,
    );
    expect(end?.code).toBe(status.OK);
    expect(messages.map((m) => m.id)).toEqual(all.slice(0, 7).map((u) => u.id));
    const many = await collect<UserMessage>(
      client,
      'ListUsers',
      { limit: LIST_PAGE_SIZE + 3, role: 'admin' },
      member.headers,
    );
    expect(many.messages.map((m) => m.id)).toEqual(
      all
        .filter((u) => u.role === 'admin')
        .slice(0, LIST_PAGE_SIZE + 3)
        .map((u) => u.id),
    );
  });

  it('resumes after the cursor: the id of the last user received', async () => {
    const first = await collect<UserMessage>(
      client,
      'ListUsers',
      { limit: 10, role: 'member' },
      member.headers,
    );
    const cursor = first.messages.at(-1)!.id;
    const rest = await collect<UserMessage>(
      client,
      'ListUsers',
      { limit: 10, role: 'member', cursor },
      member.headers,
    );
    const members = all.filter((u) => u.role === 'member').map((u) => u.id);
    expect([...first.messages, ...rest.messages].map((m) => m.id)).toEqual(members.slice(0, 20));
  });

  it('refuses an unknown role and a negative limit with INVALID_ARGUMENT', async () => {
    const role = await collect(client, 'ListUsers', { role: 'owner' }, member.headers);
    expect(role.error?.code).toBe(status.INVALID_ARGUMENT);
    expect(richStatus(role.error!).fieldViolations.map((v) => [v.field, v.reason])).toEqual([
      ['role', 'invalid_enum'],
    ]);
    const limit = await collect(client, 'ListUsers', { limit: -1 }, member.headers);
    expect(limit.error?.code).toBe(status.INVALID_ARGUMENT);
    expect(richStatus(limit.error!).fieldViolations.map((v) => v.field)).toEqual(['limit']);
  });

  it('refuses a cursor that is not a user id with INVALID_ARGUMENT naming cursor, with the other problems', async () => {
    for (const cursor of [
      'garbage',
      'usr_' + 'a'.repeat(5_000),
      `${member.userId}x`,
      all[0]!.id.toUpperCase(),
    ]) {
      const { error, messages } = await collect(client, 'ListUsers', { limit: 2, cursor }, member.headers);
      expect(messages).toEqual([]);
      expect(error?.code, cursor.slice(0, 12)).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => [v.field, v.reason])).toEqual([
        ['cursor', 'invalid_cursor'],
      ]);
      // The value is not repeated: status messages stay short.
      expect(error!.details.length).toBeLessThan(200);
      expect(JSON.stringify(richStatus(error!))).not.toContain(cursor);
    }
    const all3 = await collect(
      client,
      'ListUsers',
      { limit: -1, role: 'owner', cursor: 'x' },
      member.headers,
    );
    expect(richStatus(all3.error!).fieldViolations.map((v) => v.field)).toEqual(['limit', 'role', 'cursor']);
  });

  it('resumes after a well-formed cursor of no user (deleted, or never issued) by its place in id order', async () => {
    const members = all.filter((u) => u.role === 'member').map((u) => u.id);
    const gone = members[3]!;
    await atrium.services.store.db
      .updateTable('users')
      .set({ deleted_at: new Date().toISOString() })
      .where('id', '=', gone)
      .execute();
    try {
      const after = await collect<UserMessage>(
        client,
        'ListUsers',
        { limit: 2, role: 'member', cursor: gone },
        member.headers,
      );
      expect(after.error).toBeUndefined();
      expect(after.messages.map((m) => m.id)).toEqual(members.slice(4, 6));
    } finally {
      await atrium.services.store.db
        .updateTable('users')
        .set({ deleted_at: null })
        .where('id', '=', gone)
        .execute();
    }
    // An id later than every user's: the listing is complete, nothing follows.
    const late = await collect<UserMessage>(
      client,
      'ListUsers',
      { cursor: 'usr_zzzzzzzzzzzzzzzzzzzzzzzzzz' },
      member.headers,
    );
    expect(late.error).toBeUndefined();
    expect(late.messages).toEqual([]);
  });

  it('needs credentials', async () => {
    const { error } = await collect(client, 'ListUsers', {});
    expect(error?.code).toBe(status.UNAUTHENTICATED);
  });

  it('honours back-pressure: a client that stops reading stops the server reading the table; cancel ends it', async () => {
    const pages = Math.ceil(all.length / LIST_PAGE_SIZE);
    pageCalls = 0;
    const stream = await pausedAfterFirst(member.headers);
    // Give the server ample time to run ahead if it ignored flow control.
    await new Promise((r) => setTimeout(r, 1_000));
    const readWhilePaused = pageCalls;
    expect(readWhilePaused).toBeGreaterThan(0);
    expect(readWhilePaused).toBeLessThan(pages);
    stream.call.cancel();
    await waitFor(() => stream.ended !== undefined, 5_000, 'the cancelled status');
    expect(stream.ended?.code).toBe(status.CANCELLED);
    await new Promise((r) => setTimeout(r, 300));
    expect(pageCalls).toBe(readWhilePaused);
    const metrics = await atrium.services.metrics.metrics();
    expect(metrics).toMatch(
      /atrium_grpc_server_handled_total\{[^}]*grpc_method="ListUsers"[^}]*grpc_code="CANCELLED"[^}]*\} 1/,
    );
  });

  it('reads each page as the caller is now: an admin demoted mid-stream sees no more emails', async () => {
    const watcher = await atrium.caller({ role: 'admin' });
    pageCalls = 0;
    const stream = await pausedAfterFirst(watcher.headers);
    await new Promise((r) => setTimeout(r, 300));
    await atrium.services.core.users.updateAsAdmin(SYSTEM_ACTOR, watcher.userId, { role: 'member' });
    // Pages already read were read as an admin; every later one is read as the member they are now.
    const readAsAdmin = pageCalls;
    stream.call.resume();
    await waitFor(() => stream.ended !== undefined, 10_000, 'the end of the stream');
    expect(stream.ended?.code).toBe(status.OK);
    const later = stream.received.slice(readAsAdmin * LIST_PAGE_SIZE);
    expect(later.length).toBeGreaterThan(LIST_PAGE_SIZE);
    expect(later.filter((m) => m.email !== '' && m.id !== watcher.userId)).toEqual([]);
    expect(stream.received[0]!.email).not.toBe('');
  });

  it('ends with UNAUTHENTICATED when the key is revoked mid-stream', async () => {
    const holder = await atrium.caller({ role: 'member' });
    const stream = await pausedAfterFirst(holder.headers);
    await atrium.services.apiKeys.revoke(holder.keyId);
    stream.call.resume();
    await waitFor(() => stream.ended !== undefined, 10_000, 'the end of the stream');
    expect(stream.ended?.code).toBe(status.UNAUTHENTICATED);
    expect(stream.received.length).toBeLessThan(all.length);
  });

  it('ends with DEADLINE_EXCEEDED when the deadline passes mid-stream', async () => {
    const call = client.ListUsers!({}, metadataFor(member.headers), {
      deadline: Date.now() + 400,
    }) as grpc.ClientReadableStream<UserMessage>;
    let received = 0;
    let code: number | undefined;
    call.on('data', () => {
      received += 1;
      if (received === 1) call.pause();
    });
    call.on('error', () => undefined);
    call.on('status', (s) => (code = s.code));
    await waitFor(() => code !== undefined, 5_000, 'the deadline');
    expect(code).toBe(status.DEADLINE_EXCEEDED);
    expect(received).toBeLessThan(all.length);
  });
});
