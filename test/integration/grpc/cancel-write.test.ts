import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatementGate } from '../../helpers/statement-gate.js';
import {
  grpc,
  handledMetrics,
  rawUnary,
  startGrpcAtrium,
  unary,
  type GrpcAtrium,
  type UserMessage,
} from './support.js';

const { status } = grpc;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Issue 8 item 3: "deadlines honoured, cancellation stops work", for a call that writes. */
describe('gRPC UpdateUser past its deadline', () => {
  const gate = new StatementGate();
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;

  const stored = () =>
    atrium.services.store.db
      .selectFrom('users')
      .select(['first_name', 'last_name', 'updated_at'])
      .where('id', '=', member.userId)
      .executeTakeFirstOrThrow();
  const updateEvents = async () =>
    (
      await atrium.services.store.db
        .selectFrom('events')
        .select('id')
        .where('type', '=', 'user.updated')
        .where('owner_id', '=', member.userId)
        .execute()
    ).length;
  const update = (name: string, options: grpc.CallOptions = {}) =>
    unary<UserMessage>(
      client,
      'UpdateUser',
      { user_id: member.userId, name, update_mask: { paths: ['name'] } },
      member.headers,
      options,
    );

  beforeAll(async () => {
    atrium = await startGrpcAtrium({}, { storePlugins: [gate] });
    client = atrium.client();
    member = await atrium.caller({ role: 'member' });
    const warm = await update('Before Deadline');
    if (warm.error) throw warm.error;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('rolls the change back when the deadline passes inside its transaction: nothing stored, no event', async () => {
    const before = await stored();
    const eventsBefore = await updateEvents();
    // The UPDATE has run and its transaction is open; the call waits here past its deadline.
    const held = gate.hold('UpdateQueryNode', 'users');
    const result = update('Too Late', { deadline: Date.now() + 300 });
    await held.reached;
    const { error } = await result;
    expect(error?.code).toBe(status.DEADLINE_EXCEEDED);
    // The server sees the cancellation in this same process once its events have been handled.
    await pause(200);
    held.release();
    expect(await handledMetrics(atrium, 'UpdateUser', 'DEADLINE_EXCEEDED')).toMatch(
      /atrium_grpc_server_handled_total\{[^}]*grpc_method="UpdateUser"[^}]*grpc_code="DEADLINE_EXCEEDED"[^}]*\} 1/,
    );
    expect(await stored()).toEqual(before);
    expect(await updateEvents()).toBe(eventsBefore);

    // The client's retry is processed afresh.
    const retry = await update('Too Late');
    expect(retry.error).toBeNull();
    expect(retry.value?.name).toBe('Too Late');
    expect((await stored()).first_name).toBe('Too');
    expect(await updateEvents()).toBe(eventsBefore + 1);
  });

  it('commits a change that finishes within its deadline', async () => {
    const { error, value } = await update('In Time', { deadline: Date.now() + 5_000 });
    expect(error).toBeNull();
    expect(value?.name).toBe('In Time');
    expect((await stored()).last_name).toBe('Time');
  });

  // better-sqlite3 answers synchronously, so grpc-js's deadline timer cannot fire before such a
  // call has committed: the server must compare the deadline itself before every statement.
  it.each(['1n', '1u', '0m'])(
    'stores nothing for a call whose grpc-timeout (%s) is spent on arrival, and answers DEADLINE_EXCEEDED',
    async (timeout) => {
      const before = await stored();
      const eventsBefore = await updateEvents();
      const result = await rawUnary(
        atrium.address,
        'UpdateUser',
        { user_id: member.userId, name: `Expired ${timeout}`, update_mask: { paths: ['name'] } },
        { ...member.headers, 'grpc-timeout': timeout },
      );
      expect(result.code).toBe(status.DEADLINE_EXCEEDED);
      expect(await stored()).toEqual(before);
      expect(await updateEvents()).toBe(eventsBefore);
    },
  );

  it('still commits a raw call whose grpc-timeout leaves time', async () => {
    const result = await rawUnary(
      atrium.address,
      'UpdateUser',
      { user_id: member.userId, name: 'Raw Intime', update_mask: { paths: ['name'] } },
      { ...member.headers, 'grpc-timeout': '60S' },
    );
    expect(result.code).toBe(status.OK);
    expect((await stored()).last_name).toBe('Intime');
  });
});
