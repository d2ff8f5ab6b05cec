import { sql, type ColumnNode, type UpdateQueryNode, type ValueNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../src/domain/actor.js';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { call, type RestAnswer } from '../helpers/rest-client.js';
import { StatementGate } from '../helpers/statement-gate.js';
import { until } from '../helpers/wait.js';

/**
 * Writes to one user that overlap (two Atrium instances on one PostgreSQL database, or two requests
 * on one). Each test holds the first writer with its UPDATE run and its transaction open, sends the
 * second, and releases the first only once the second is waiting for the row (PostgreSQL shows it
 * waiting on a lock). Until 2026-11-28 the second had already read the row by then, without a lock,
 * and answered and emitted that stale row with its own change on top; on SQLite one transaction
 * runs at a time, so there the second simply starts after the first.
 */
describe('concurrent writes to one user', () => {
  const gate = new StatementGate();
  let atrium: TestAtrium;
  let base: string;
  let gqlUrl: string;
  let admin: Record<string, string>;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { storePlugins: [gate] });
    const { httpUrl } = await atrium.listen();
    base = httpUrl!;
    gqlUrl = `${base}/graphql`;
    admin = (await atrium.caller({ role: 'admin' })).headers;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  /** Resolves once `n` statements on users wait for a row lock (PostgreSQL); SQLite has no such wait. */
  const waitingForUsersRow = (n: number) =>
    atrium.database.dialect === 'postgres'
      ? until(async () => {
          const { rows } = await sql<{ waiting: string | number }>`
            select count(*) as waiting from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query like '%"users"%'`.execute(
            atrium.services.store.db,
          );
          return Number(rows[0]!.waiting) >= n;
        }, `${n} statements waiting for the user's row`)
      : Promise.resolve();

  /** The `user.updated` events of a user, oldest first, as the outbox will deliver them. */
  const userEvents = async (userId: string) =>
    (
      await atrium.services.store.db
        .selectFrom('events')
        .select(['id', 'data'])
        .where('type', '=', 'user.updated')
        .where('owner_id', '=', userId)
        .orderBy('created_at')
        .orderBy('id')
        .execute()
    ).map((e) => ({ id: e.id, ...(JSON.parse(e.data) as { object: unknown; changed: string[] }) }));

  /** The webhook `object` a REST user answer stands for (timestamps in Unix seconds). */
  const asEventObject = (res: RestAnswer) => {
    const { _links, created_at, ...rest } = res.body as Record<string, unknown>;
    return { ...rest, created_at: Math.floor(Date.parse(created_at as string) / 1000) };
  };

  const gql = async (query: string, variables: Record<string, unknown>, headers: Record<string, string>) => {
    const res = await fetch(gqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as { data?: Record<string, Record<string, unknown>>; errors?: unknown[] };
  };

  it("two updates at once: each answers and emits the user as it committed, never the other's old value", async () => {
    const target = await atrium.caller();
    const oldEmail = `${target.userId.toLowerCase()}-old@example.com`;
    const newEmail = `${target.userId.toLowerCase()}-new@example.com`;
    await atrium.services.core.users.update(SYSTEM_ACTOR, target.userId, {
      name: 'Ada Old',
      email: oldEmail,
    });

    // REST PATCH {name} by an admin, held mid-write; GraphQL updateUser {email} by the user themself.
    const held = gate.hold('UpdateQueryNode', 'users');
    const first = call(base, 'PATCH', `/v1/users/${target.userId}`, {
      headers: admin,
      json: { name: 'Ada New' },
    });
    await held.reached;
    const second = gql(
      'mutation($id: ID!, $in: UpdateUserInput!) { updateUser(id: $id, input: $in) { id firstName lastName email role } }',
      { id: target.userId, in: { email: newEmail } },
      target.headers,
    );
    await waitingForUsersRow(1);
    held.release();
    const [a, b] = await Promise.all([first, second]);

    expect(a.status, a.text).toBe(200);
    expect(a.body).toMatchObject({ name: 'Ada New', email: oldEmail });
    expect(b.errors).toBeUndefined();
    expect(b.data?.updateUser).toEqual({
      id: target.userId,
      firstName: 'Ada',
      lastName: 'New',
      email: newEmail,
      role: 'MEMBER',
    });
    const now = await call(base, 'GET', `/v1/users/${target.userId}`, { headers: admin });
    expect(now.body).toMatchObject({ name: 'Ada New', email: newEmail });

    const events = await userEvents(target.userId);
    const byName = events.find((e) => e.changed.join() === 'name');
    const byEmail = events.find((e) => e.changed.join() === 'email');
    expect(byName).toMatchObject({ changed: ['name'], object: asEventObject(a) });
    expect(byEmail).toMatchObject({ changed: ['email'], object: asEventObject(now) });
  });

  it('a PATCH racing a soft delete: ordered after it, 404 and nothing written; ordered before it, 200', async () => {
    const late = await atrium.caller();
    await atrium.services.core.users.update(SYSTEM_ACTOR, late.userId, { name: 'Bo Before' });
    const eventsBefore = await userEvents(late.userId);

    // `atrium users delete` (this call) is mid-write when the PATCH arrives.
    let held = gate.hold('UpdateQueryNode', 'users');
    const deleting = atrium.services.core.users.delete(SYSTEM_ACTOR, late.userId);
    await held.reached;
    const patching = call(base, 'PATCH', `/v1/users/${late.userId}`, {
      headers: admin,
      json: { name: 'Bo After' },
    });
    await waitingForUsersRow(1);
    held.release();
    await deleting;
    const refused = await patching;
    expect(refused.status, refused.text).toBe(404);
    const deletedAnswer = await call(base, 'PATCH', `/v1/users/${late.userId}`, {
      headers: admin,
      json: { name: 'Bo After' },
    });
    expect(deletedAnswer.status).toBe(404);
    const { request_id: _a, ...refusedBody } = refused.body!;
    const { request_id: _b, ...deletedBody } = deletedAnswer.body!;
    expect(refusedBody).toEqual(deletedBody);
    const row = await atrium.services.store.db
      .selectFrom('users')
      .select(['first_name', 'last_name'])
      .where('id', '=', late.userId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ first_name: 'Bo', last_name: 'Before' });
    expect(await userEvents(late.userId)).toEqual(eventsBefore);

    // The other order: the PATCH is mid-write when the delete comes; both succeed, in that order.
    const early = await atrium.caller();
    held = gate.hold('UpdateQueryNode', 'users');
    const patched = call(base, 'PATCH', `/v1/users/${early.userId}`, {
      headers: admin,
      json: { name: 'Cy Kept' },
    });
    await held.reached;
    const deleted = atrium.services.core.users.delete(SYSTEM_ACTOR, early.userId);
    await waitingForUsersRow(1);
    held.release();
    const ok = await patched;
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toMatchObject({ name: 'Cy Kept' });
    await expect(deleted).resolves.toMatchObject({ id: early.userId });
    const [event, ...more] = await userEvents(early.userId);
    expect(more).toEqual([]);
    expect(event).toMatchObject({ changed: ['name'], object: asEventObject(ok) });
    expect((await call(base, 'GET', `/v1/users/${early.userId}`, { headers: admin })).status).toBe(404);
  });

  it('concurrent email verifications: only the first sets email_verified_at and emits an event', async () => {
    const me = await atrium.caller();
    const verify = () => call(base, 'POST', `/api/v2/users/${me.userId}/verify`, { headers: me.headers });
    const writes = gate.record('UpdateQueryNode', 'users');
    const held = gate.hold('UpdateQueryNode', 'users');
    const first = verify();
    await held.reached;
    writes.stop();
    // The time the first verification writes, read from its UPDATE (it is not committed yet).
    const verifiedAt = (writes.nodes[0] as UpdateQueryNode).updates
      ?.filter((u) => (u.column as ColumnNode).column.name === 'email_verified_at')
      .map((u) => (u.value as ValueNode).value)[0];
    expect(verifiedAt).toEqual(expect.any(String));

    const others = Array.from({ length: 5 }, verify);
    await waitingForUsersRow(5);
    held.release();
    const answers = await Promise.all([first, ...others]);
    expect(answers.map((r) => r.status)).toEqual([204, 204, 204, 204, 204, 204]);

    const row = await atrium.services.store.db
      .selectFrom('users')
      .select('email_verified_at')
      .where('id', '=', me.userId)
      .executeTakeFirstOrThrow();
    expect(row.email_verified_at).toBe(verifiedAt);
    const events = await userEvents(me.userId);
    expect(events).toHaveLength(1);
    const user = await call(base, 'GET', `/v1/users/${me.userId}`, { headers: admin });
    expect(events[0]).toMatchObject({ changed: ['email_verified'], object: asEventObject(user) });
  });
});
