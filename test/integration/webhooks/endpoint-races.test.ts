import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call, type RestAnswer } from '../../helpers/rest-client.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { Receiver, verifyWithStripe } from './support.js';

/**
 * Two writers of one webhook endpoint at once, over real sockets: PATCHes naming different fields,
 * a PATCH beside the worker disabling the endpoint after a 410, two secret rotations. The first
 * writer is held with its read of the endpoint run (the gate); the others are sent meanwhile and
 * get as far as they can (answered, or waiting for the row lock on PostgreSQL); then the first is
 * let go. Until 2026-11-28 a PATCH wrote back every column as it had read it, and a rotation read
 * the secret unlocked, so the others' changes were lost. On SQLite the held statement has the
 * only connection, so nothing else can run before it finishes: these tests show the race on
 * PostgreSQL, and on SQLite that the same steps end the same way.
 */
const gate = new StatementGate();
let atrium: TestAtrium;
let base: string;
let owner: Record<string, string>;
let receiver: Receiver;
/** A connection of the test's own, to see what PostgreSQL's sessions wait for. */
let observer: pg.Client | undefined;

beforeAll(async () => {
  atrium = await startTestAtrium({}, ['api', 'worker'], { storePlugins: [gate] });
  base = (await atrium.listen()).httpUrl!;
  owner = (await atrium.caller()).headers;
  receiver = await new Receiver().start();
  if (atrium.database.dialect === 'postgres') {
    observer = new pg.Client({ connectionString: atrium.database.url });
    await observer.connect();
  }
});
afterAll(async () => {
  await observer?.end();
  await atrium?.stop();
  await receiver?.stop();
});

const BASE = '/api/v2/webhook_endpoints';
const send = (method: string, path: string, json?: unknown) =>
  call(base, method, path, { headers: owner, ...(json === undefined ? {} : { json }) });

async function newEndpoint(path: string): Promise<{ id: string; secret: string }> {
  const res = await send('POST', BASE, { url: receiver.url(path), events: ['order.created'] });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; secret: string };
}

/** Resolves once `condition` holds, checking it again every few milliseconds. */
async function until(condition: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Sessions of the test database waiting for a lock another one holds (PostgreSQL). */
async function lockWaiters(): Promise<number> {
  const { rows } = await observer!.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return rows[0]!.n;
}

/** Counts the requests the server receives from now until stop(). */
function arrivals(): { count(): number; stop(): void } {
  let n = 0;
  const listener = () => void (n += 1);
  atrium.http!.server.on('request', listener);
  return { count: () => n, stop: () => void atrium.http!.server.off('request', listener) };
}

/**
 * While the first writer is held, lets `others` requests get as far as they can: on PostgreSQL
 * until each has `finished()` (it did not wait for the first) or waits for a lock; on SQLite until
 * each has reached the server, where its first statement waits for the connection the held one has.
 */
async function othersBlockedOrDone(
  others: number,
  arrived: { count(): number },
  finished: () => Promise<number> | number,
): Promise<void> {
  if (observer) {
    await until(async () => (await finished()) + (await lockWaiters()) >= others, 'the others ran or wait');
  } else {
    await until(() => arrived.count() >= others, 'the others reached the server');
  }
}

/** Counts the promises settled so far. */
function settled(promises: Array<Promise<unknown>>): () => number {
  let n = 0;
  for (const p of promises) void p.then(() => (n += 1));
  return () => n;
}

const view = async (id: string) => {
  const res = await send('GET', `${BASE}/${id}`);
  expect(res.status).toBe(200);
  return res.body as { url: string; events: string[]; status: string; disabled_reason: string | null };
};

const expectOk = (res: RestAnswer) => expect(res.status, res.text).toBe(200);

describe('concurrent PATCHes of one endpoint', () => {
  it('enabled:false, a new url and new events sent at once all take effect', async () => {
    const endpoint = await newEndpoint('/patch-old');
    const path = `${BASE}/${endpoint.id}`;

    const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
    const arrived = arrivals();
    const first = send('PATCH', path, { enabled: false });
    await held.reached;
    const others = [
      send('PATCH', path, { url: receiver.url('/patch-new') }),
      send('PATCH', path, { events: ['order.cancelled'] }),
    ];
    await othersBlockedOrDone(2, arrived, settled(others));
    arrived.stop();
    held.release();

    for (const res of await Promise.all([first, ...others])) expectOk(res);
    expect(await view(endpoint.id)).toMatchObject({
      url: receiver.url('/patch-new'),
      events: ['order.cancelled'],
      status: 'disabled',
      disabled_reason: 'disabled by its owner',
    });
  });

  it("a PATCH does not undo the worker's disabling after a 410 that came while it was held", async () => {
    const endpoint = await newEndpoint('/gone');
    receiver.responder = (r) => ({ status: r.path === '/gone' ? 410 : 200 });
    const path = `${BASE}/${endpoint.id}`;
    const disabledInDatabase = async () =>
      (
        await atrium.services.store.db
          .selectFrom('webhook_endpoints')
          .select('disabled_at')
          .where('id', '=', endpoint.id)
          .executeTakeFirstOrThrow()
      ).disabled_at === null
        ? 0
        : 1;

    const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
    const arrived = arrivals();
    const patch = send('PATCH', path, { events: ['*'] });
    await held.reached;
    // A test delivery answered 410: the worker disables the endpoint (or waits for the PATCH's lock).
    const queued = send('POST', `${path}/test`, { type: 'order.created' });
    await othersBlockedOrDone(1, arrived, disabledInDatabase);
    arrived.stop();
    held.release();

    expectOk(await patch);
    expect((await queued).status).toBe(202);
    await until(async () => {
      const res = await send('GET', `${path}/deliveries`);
      const [delivery] = (res.body as { data: Array<{ status: string }> }).data;
      return delivery !== undefined && delivery.status !== 'pending';
    }, 'the 410 delivery was completed');
    const after = await view(endpoint.id);
    expect(after).toMatchObject({ events: ['*'], status: 'disabled' });
    expect(after.disabled_reason).toMatch(/410/);
  });
});

describe('concurrent secret rotations', () => {
  it('both secrets handed out sign the next delivery; the original no longer does', async () => {
    const endpoint = await newEndpoint('/rotate');
    const path = `${BASE}/${endpoint.id}`;

    const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
    const arrived = arrivals();
    const first = send('POST', `${path}/rotate_secret`);
    await held.reached;
    const second = send('POST', `${path}/rotate_secret`);
    await othersBlockedOrDone(1, arrived, settled([second]));
    arrived.stop();
    held.release();

    const answers = await Promise.all([first, second]);
    for (const res of answers) expectOk(res);
    const [a, b] = answers.map((res) => (res.body as { secret: string }).secret);
    expect(a).not.toBe(b);

    expect((await send('POST', `${path}/test`, { type: 'order.created' })).status).toBe(202);
    await receiver.until(() => receiver.at('/rotate').length >= 1);
    const delivery = receiver.at('/rotate')[0]!;
    expect(String(delivery.headers['x-webhook-signature'])).toMatch(
      /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/,
    );
    expect(verifyWithStripe(delivery, a!).id).toBe(delivery.eventId);
    expect(verifyWithStripe(delivery, b!).id).toBe(delivery.eventId);
    expect(() => verifyWithStripe(delivery, endpoint.secret)).toThrow();
  });
});

/**
 * A test event (or a re-send) beside a DELETE or a disabling PATCH of its endpoint: the first is
 * held with its read of the endpoint run, the other sent meanwhile. Until 2026-11-29 that read took
 * no lock, so on PostgreSQL the DELETE (or PATCH) answered while the test event was held, and the
 * test event was then accepted, 202, for an endpoint already deleted or disabled: nothing was ever
 * sent, against the 404/409 the caller would get a moment later. Now the other waits for the row,
 * so it answers after the test event, which was queued while the endpoint could still receive it.
 */
describe('a test event or a re-send beside a DELETE or a disabling PATCH', () => {
  /** Holds `first` at its read of the endpoint; tells whether `other` had answered by the release. */
  async function heldBeside(
    first: () => Promise<RestAnswer>,
    other: () => Promise<RestAnswer>,
  ): Promise<{ first: RestAnswer; other: RestAnswer; otherAnsweredFirst: boolean }> {
    const held = gate.hold('SelectQueryNode', 'webhook_endpoints');
    const arrived = arrivals();
    const firstAnswer = first();
    await held.reached;
    const otherAnswer = other();
    const otherDone = settled([otherAnswer]);
    await othersBlockedOrDone(1, arrived, otherDone);
    arrived.stop();
    const otherAnsweredFirst = otherDone() === 1;
    held.release();
    return { first: await firstAnswer, other: await otherAnswer, otherAnsweredFirst };
  }

  const testEvent = (id: string) => () => send('POST', `${BASE}/${id}/test`, { type: 'order.created' });

  it('a test event is not accepted for an endpoint whose DELETE has answered', async () => {
    const endpoint = await newEndpoint('/deleted');
    const run = await heldBeside(testEvent(endpoint.id), () => send('DELETE', `${BASE}/${endpoint.id}`));

    expect(run.other.status, run.other.text).toBe(204);
    // Queued before the DELETE (then deleted with its endpoint) or refused after it: never accepted
    // once the endpoint was gone.
    expect({ deletedFirst: run.otherAnsweredFirst, test: run.first.status }).toEqual(
      run.otherAnsweredFirst ? { deletedFirst: true, test: 404 } : { deletedFirst: false, test: 202 },
    );
    expect((await send('GET', `${BASE}/${endpoint.id}`)).status).toBe(404);
  });

  it('a test event is not accepted for an endpoint whose disabling PATCH has answered', async () => {
    const endpoint = await newEndpoint('/disabled');
    const run = await heldBeside(testEvent(endpoint.id), () =>
      send('PATCH', `${BASE}/${endpoint.id}`, { enabled: false }),
    );

    expectOk(run.other);
    expect({ disabledFirst: run.otherAnsweredFirst, test: run.first.status }).toEqual(
      run.otherAnsweredFirst ? { disabledFirst: true, test: 409 } : { disabledFirst: false, test: 202 },
    );
    expect(await view(endpoint.id)).toMatchObject({ status: 'disabled' });
  });

  it('a re-send is not accepted for an endpoint whose disabling PATCH has answered', async () => {
    const endpoint = await newEndpoint('/resent');
    const path = `${BASE}/${endpoint.id}`;
    expect((await testEvent(endpoint.id)()).status).toBe(202);
    await receiver.until(() => receiver.at('/resent').length >= 1);
    let delivery: { id: string; status: string } | undefined;
    await until(async () => {
      const res = await send('GET', `${path}/deliveries`);
      delivery = (res.body as { data: Array<{ id: string; status: string }> }).data[0];
      return delivery !== undefined && delivery.status !== 'pending';
    }, 'the first delivery was completed');

    const run = await heldBeside(
      () => send('POST', `${path}/deliveries/${delivery!.id}/resend`),
      () => send('PATCH', path, { enabled: false }),
    );

    expectOk(run.other);
    expect({ disabledFirst: run.otherAnsweredFirst, resend: run.first.status }).toEqual(
      run.otherAnsweredFirst ? { disabledFirst: true, resend: 409 } : { disabledFirst: false, resend: 202 },
    );
  });

  it('of two DELETEs of one endpoint at once, one answers 204 and the other 404', async () => {
    const endpoint = await newEndpoint('/twice');
    const run = await heldBeside(
      () => send('DELETE', `${BASE}/${endpoint.id}`),
      () => send('DELETE', `${BASE}/${endpoint.id}`),
    );
    expect([run.first.status, run.other.status].sort()).toEqual([204, 404]);
  });
});
