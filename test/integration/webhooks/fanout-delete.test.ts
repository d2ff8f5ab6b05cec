import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { Outbox } from '../../../src/webhooks/outbox.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { until } from '../../helpers/wait.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint } from './support.js';

/**
 * The fan-out beside a DELETE of one of the endpoints it is fanning out to. The fan-out reads the
 * owners' endpoints, then inserts one delivery per endpoint, in one transaction. Until 2026-11-29
 * that read took no lock, so on PostgreSQL a DELETE committed between the read and the insert made
 * the insert fail on the foreign key: the whole batch (up to 500 events, other endpoints' and other
 * users' included) rolled back, the worker logged `webhook fan-out failed` and tried again a poll
 * later. The same happened the other way round: a DELETE not yet committed when the fan-out read,
 * committed while the insert waited for it. Now the read locks the rows `FOR KEY SHARE`: a DELETE
 * waits for the fan-out to commit and takes the new deliveries with it, and a fan-out that finds a
 * DELETE under way waits for it and then skips the endpoint. On SQLite the fan-out's transaction
 * (`BEGIN IMMEDIATE`, the only connection) runs whole before or after the DELETE: the same steps
 * end the same way.
 */
const gate = new StatementGate();
let atrium: TestAtrium;
let catalogue: Catalogue;
/** A connection of the test's own: to see which sessions wait for a lock, and to hold one. */
let observer: pg.Client | undefined;

beforeAll(async () => {
  atrium = await startTestAtrium({}, ['api', 'auth'], { storePlugins: [gate] });
  catalogue = await makeCatalogue(atrium);
  if (atrium.database.dialect === 'postgres') {
    observer = new pg.Client({ connectionString: atrium.database.url });
    await observer.connect();
  }
});
afterAll(async () => {
  await observer?.end();
  await atrium?.stop();
});

/** Sessions of the test database waiting for a lock another one holds (PostgreSQL). */
async function lockWaiters(): Promise<number> {
  const { rows } = await observer!.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return rows[0]!.n;
}

/** Settles to the outcome without rejecting, so a failure is asserted on rather than thrown. */
function outcome<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: string }> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, error: String(err) }),
  );
}

/**
 * Two users: the owner with endpoints `doomed` and `kept`, another with `theirs`, each with an
 * order whose `order.created` waits in the outbox (this process runs no worker).
 */
async function scene() {
  const owner = await atrium.caller();
  const other = await atrium.caller();
  const url = (path: string) => `http://127.0.0.1:9${path}`;
  const subscribed = { events: ['order.created'] };
  const doomed = await createEndpoint(atrium, owner.headers, { url: url('/doomed'), ...subscribed });
  const kept = await createEndpoint(atrium, owner.headers, { url: url('/kept'), ...subscribed });
  const theirs = await createEndpoint(atrium, other.headers, { url: url('/theirs'), ...subscribed });
  const mine = await api(atrium, 'POST', '/api/v2/orders', owner.headers, orderBody(catalogue));
  const yours = await api(atrium, 'POST', '/api/v2/orders', other.headers, orderBody(catalogue));
  expect([mine.status, yours.status]).toEqual([201, 201]);
  return { owner, doomed, kept, theirs, orders: [mine.body!.id as string, yours.body!.id as string] };
}

/** The orders each endpoint has a delivery for, and how many events still wait in the outbox. */
async function deliveries(endpoints: Record<string, { id: string }>) {
  const db = atrium.services.store.db;
  const rows = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select(['d.endpoint_id', 'e.data'])
    .where(
      'd.endpoint_id',
      'in',
      Object.values(endpoints).map((e) => e.id),
    )
    .execute();
  const to = Object.fromEntries(
    Object.entries(endpoints).map(([name, e]) => [
      name,
      rows
        .filter((r) => r.endpoint_id === e.id)
        .map((r) => (JSON.parse(r.data) as { id: string }).id)
        .sort(),
    ]),
  );
  const waiting = await db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('dispatched_at', 'is', null)
    .executeTakeFirstOrThrow();
  return { to, undispatched: Number(waiting.n) };
}

describe('a DELETE of an endpoint beside the fan-out', () => {
  it('a DELETE sent while the fan-out holds its read of the endpoints fails no batch', async () => {
    const { owner, doomed, kept, theirs, orders } = await scene();
    const [mine, yours] = orders;

    // The fan-out is held with its read of the endpoints run, its transaction open.
    const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
    const fanning = outcome(new Outbox(atrium.services.store).fanOut(new Date()));
    await held.reached;
    // The DELETE's own read of the endpoint, once issued (on SQLite it then waits for the connection).
    const issued = gate.record('SelectQueryNode', 'webhook_endpoints');
    let answered = false;
    // The domain's DELETE, as the REST route, the GraphQL mutation and the CLI call it.
    const deleting = outcome(webhooksOf(atrium.services).endpoints.delete(SYSTEM_ACTOR, doomed.id)).finally(
      () => (answered = true),
    );
    if (observer) {
      // PostgreSQL: until the DELETE has answered, or waits for the fan-out's lock.
      await until(async () => answered || (await lockWaiters()) >= 1, 'the DELETE answered or waits');
    } else {
      await until(() => issued.nodes.length >= 1, 'the DELETE was issued');
    }
    issued.stop();
    const deletedFirst = answered;
    held.release();

    const fanOut = await fanning;
    expect(await deleting).toEqual({ ok: true, value: undefined });
    // The batch went through: every event fanned out in this one call, none left for a retry.
    expect(fanOut).toEqual({ ok: true, value: expect.any(Number) });
    // The DELETE waited for the fan-out and took the delivery it had just made with the endpoint:
    // nothing is left to send to it, and the others' deliveries are there at once.
    expect(deletedFirst).toBe(false);
    expect(await deliveries({ doomed, kept, theirs })).toEqual({
      to: { doomed: [], kept: [mine], theirs: [yours] },
      undispatched: 0,
    });
    expect((await api(atrium, 'GET', `/api/v2/webhook_endpoints/${doomed.id}`, owner.headers)).status).toBe(
      404,
    );
  });

  // A DELETE through the API is one statement that commits as it runs; the test's own connection
  // holds one open to force the order. SQLite has one writer at a time (`BEGIN IMMEDIATE`), so a
  // DELETE under way keeps the fan-out from starting at all.
  it.skipIf(process.env.TEST_DATABASE_URL?.startsWith('postgres') !== true)(
    'a fan-out that finds a DELETE under way waits for it and skips the deleted endpoint',
    async () => {
      const { doomed, kept, theirs, orders } = await scene();
      const [mine, yours] = orders;

      // Not the observer: pg_stat_activity stays as first read for the rest of a transaction.
      const holder = new pg.Client({ connectionString: atrium.database.url });
      await holder.connect();
      let fanning: ReturnType<typeof outcome<number>> | undefined;
      try {
        await holder.query('BEGIN');
        await holder.query('DELETE FROM webhook_endpoints WHERE id = $1', [doomed.id]);
        fanning = outcome(new Outbox(atrium.services.store).fanOut(new Date()));
        await until(async () => (await lockWaiters()) >= 1, 'the fan-out waits for the DELETE');
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }

      expect(await fanning).toEqual({ ok: true, value: expect.any(Number) });
      expect(await deliveries({ doomed, kept, theirs })).toEqual({
        to: { doomed: [], kept: [mine], theirs: [yours] },
        undispatched: 0,
      });
    },
  );

  // The lock is FOR KEY SHARE, not FOR SHARE: only a DELETE waits for the fan-out, not the writes
  // that keep the row (a PATCH, a secret rotation, the worker disabling after a 410). On SQLite
  // every write waits for the fan-out's transaction anyway.
  it.skipIf(process.env.TEST_DATABASE_URL?.startsWith('postgres') !== true)(
    'a PATCH and a secret rotation sent while the fan-out is held do not wait for it',
    async () => {
      const { kept } = await scene();
      const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
      const fanning = outcome(new Outbox(atrium.services.store).fanOut(new Date()));
      await held.reached;
      const { endpoints } = webhooksOf(atrium.services);
      let answered = false;
      const writes = outcome(
        (async () => {
          const patched = await endpoints.update(SYSTEM_ACTOR, kept.id, {
            events: ['order.created', 'order.cancelled'],
          });
          const rotated = await endpoints.rotateSecret(SYSTEM_ACTOR, kept.id);
          return { events: patched.events, rotated: rotated.secret !== kept.secret };
        })(),
      ).finally(() => (answered = true));
      await until(async () => answered || (await lockWaiters()) >= 1, 'the writes answered or wait');
      const answeredWhileHeld = answered;
      held.release();

      expect(answeredWhileHeld).toBe(true);
      expect(await writes).toEqual({
        ok: true,
        value: { events: ['order.created', 'order.cancelled'], rotated: true },
      });
      expect(await fanning).toEqual({ ok: true, value: expect.any(Number) });
    },
  );
});
