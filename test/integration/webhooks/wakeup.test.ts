import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { sharedDatabase, testDialect, type TestDatabase } from '../../helpers/database.js';
import { ADDRESS } from '../orders/fixtures.js';
import { serve, type Served } from '../../helpers/serve.js';
import { Receiver, sleep } from './support.js';

/**
 * A worker in its own process hears of a committed event through PostgreSQL NOTIFY, not the 500 ms
 * poll; and when its LISTEN connection is cut, the poll still delivers and the wake-ups come back.
 * A PostgreSQL rule: on SQLite the worker runs inside the one serving process and the in-process
 * bus wakes it.
 */
const onPostgres = testDialect() === 'postgres';
if (!onPostgres) {
  console.error(
    'wakeup.test.ts skipped: a worker in a separate process exists only on PostgreSQL (set TEST_DATABASE_URL)',
  );
}
/** The worker's fallback poll. Lag from the poll alone is spread evenly over 0..POLL_MS. */
const POLL_MS = 500;
const EVENTS = 20;

let database: TestDatabase;
let services: Services;
let receiver: Receiver;
let worker: Served | undefined;

describe.skipIf(!onPostgres)('waking a separate worker process on PostgreSQL', () => {
  let order: () => Promise<number>;

  beforeAll(async () => {
    database = await sharedDatabase();
    services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }), {
      migrate: true,
    });
    receiver = await new Receiver().start();
    const product = await services.core.products.create({ name: 'Widget', priceCents: 1000 });
    const user = await services.core.users.create({ handle: 'woken', email: 'woken@example.com' });
    await webhooksOf(services).endpoints.create(SYSTEM_ACTOR, { url: receiver.url('/w'), userId: user.id });
    /** Makes one order (one `order.created`) and returns when its transaction committed. */
    order = async () => {
      await services.core.orders.create(
        { id: user.id, kind: 'user', role: 'member' },
        {
          items: [{ productId: product.id, quantity: 1 }],
          currency: 'USD',
          shippingAddress: { ...ADDRESS, postalCode: ADDRESS.postal_code },
        },
      );
      return performance.now();
    };
    worker = await serve({ DATABASE_URL: database.url }, { roles: 'worker' });
  });

  afterAll(async () => {
    await worker?.stop().catch(() => undefined);
    await closeServices(services);
    await receiver?.stop();
    await database?.drop();
  });

  /** Commit → arrival at the receiver for EVENTS events made at uneven moments. */
  async function lags(): Promise<number[]> {
    const result: number[] = [];
    for (let i = 0; i < EVENTS; i++) {
      // Uneven spacing, so the events do not line up with the poll's phase.
      await sleep(20 + ((i * 37) % 90));
      const before = receiver.received.length;
      const committed = await order();
      await receiver.until((all) => all.length > before, 10_000);
      result.push(receiver.received[before]!.at - committed);
    }
    return result.sort((a, b) => a - b);
  }

  const median = (sorted: number[]) => sorted[Math.floor(sorted.length / 2)]!;

  it('delivers a committed event well within the poll interval', async () => {
    const got = await lags();
    // By polling alone the median would be about POLL_MS / 2.
    expect(median(got)).toBeLessThan(POLL_MS / 5);
    expect(got.filter((lag) => lag >= POLL_MS / 2).length).toBeLessThanOrEqual(2);
  }, 60_000);

  it('falls back to polling while its LISTEN connection is gone, and listens again', async () => {
    const listeners = () =>
      services.store.db
        .selectFrom('pg_stat_activity' as never)
        .select(['pid' as never])
        .where('query' as never, '=', 'LISTEN atrium_outbox' as never)
        // This test's database only: a worker of another test file running beside it listens too.
        .where(sql<boolean>`datname = current_database()`)
        .execute() as Promise<Array<{ pid: number }>>;
    const [listener] = await listeners();
    expect(listener).toBeDefined();
    const before = receiver.received.length;
    // Cut the LISTEN connection and commit at once, before it can be back: the poll must deliver.
    await services.store.db
      .selectNoFrom((eb) => eb.fn<boolean>('pg_terminate_backend', [eb.val(listener!.pid)]).as('ok'))
      .execute();
    await order();
    await receiver.until((all) => all.length > before, 5_000);
    // The worker reconnects (after about a second) and wake-ups are prompt again.
    for (let i = 0; i < 50 && (await listeners()).length === 0; i++) await sleep(100);
    expect(await listeners()).toHaveLength(1);
    // One line for the dropped connection, once it listens again; the database never went away, so
    // no outage is logged (docs/webhooks.md, Durability).
    const said = (msg: string) =>
      worker!
        .stderr()
        .split('\n')
        .filter((l) => l.includes(`"msg":"${msg}`));
    for (let i = 0; i < 50 && said('webhook wake-up connection was lost').length === 0; i++) await sleep(20);
    expect(said('webhook wake-up connection was lost; listening again')).toHaveLength(1);
    expect(said('webhook wake-up connection was lost')[0]).toContain('"code":"57P01"');
    expect(said('database unreachable')).toHaveLength(0);
    expect(median(await lags())).toBeLessThan(POLL_MS / 5);
  }, 60_000);
});
