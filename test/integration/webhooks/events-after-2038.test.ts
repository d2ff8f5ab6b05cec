import { Migrator } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Clock, unixSeconds } from '../../../src/domain/clock.js';
import { migrationsFor } from '../../../src/store/migrations/index.js';
import { openStore } from '../../../src/store/store.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { freshDatabase, testDialect } from '../../helpers/database.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint, Receiver, verifyWithStripe } from './support.js';

/**
 * Events recorded after 2038-01-19T03:14:07Z, the last second a 4-byte integer holds: `created`
 * (Unix seconds) was a PostgreSQL `integer` until migration 0010, so every write that records an
 * outbox event failed with "out of range for type integer" from then on. The clock is the
 * service's own (injected), set to 2040; the event is read back as a number from the table, the
 * REST event and the signed webhook body.
 */
const AT = new Date('2040-01-01T00:00:00.000Z');
const CREATED = unixSeconds(AT); // 2208988800 > 2147483647

describe('events recorded after 2038-01-19', () => {
  const clock: Clock = { now: () => AT };
  let atrium: TestAtrium;
  let receiver: Receiver;
  let catalogue: Catalogue;

  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['api', 'auth', 'worker'], { clock });
    receiver = await new Receiver().start();
    catalogue = await makeCatalogue(atrium);
  });
  afterAll(async () => {
    await atrium?.stop();
    await receiver?.stop();
  });

  it('an order made in 2040 is stored, read and delivered with created as a number', async () => {
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, {
      url: receiver.url('/y2038'),
      events: ['order.created'],
    });

    const made = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    expect(made.status).toBe(201);

    const row = await atrium.services.store.db
      .selectFrom('events')
      .select(['id', 'created'])
      .where('owner_id', '=', who.userId)
      .where('type', '=', 'order.created')
      .executeTakeFirstOrThrow();
    expect(row.created).toBe(CREATED);

    const read = await api(atrium, 'GET', `/api/v2/events/${row.id}`, who.headers);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: row.id, type: 'order.created', created: CREATED });

    await receiver.until((all) => all.some((r) => r.eventId === row.id));
    const delivered = receiver.at('/y2038').find((r) => r.eventId === row.id)!;
    verifyWithStripe(delivered, endpoint.secret);
    expect(delivered.raw).toContain(`"created":${CREATED},`);
    expect((JSON.parse(delivered.raw) as { created: unknown }).created).toBe(CREATED);
  });

  it("a user's update in 2040 records its event", async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const who = await atrium.caller();
    const res = await api(atrium, 'PATCH', `/v1/users/${who.userId}`, admin.headers, {
      name: 'Ada Lovelace',
    });
    expect(res.status).toBe(200);
    const row = await atrium.services.store.db
      .selectFrom('events')
      .select('created')
      .where('owner_id', '=', who.userId)
      .where('type', '=', 'user.updated')
      .executeTakeFirstOrThrow();
    expect(row.created).toBe(CREATED);
  });
});

describe(`a database migrated before 0010, on ${testDialect()}`, () => {
  it('keeps its events through 0010 and takes one after 2038 from then on', async () => {
    const database = await freshDatabase();
    const store = openStore(database.url);
    try {
      const before = Object.fromEntries(
        Object.entries(migrationsFor(store.dialect)).filter(([name]) => name < '0010'),
      );
      const old = await new Migrator({
        db: store.db,
        provider: { getMigrations: async () => before },
      }).migrateToLatest();
      expect(old.error).toBeUndefined();
      const event = (id: string, created: number) => ({
        id,
        type: 'order.created',
        api_version: '2024-06-01',
        owner_id: null,
        data: '{}',
        created,
        created_at: new Date(created * 1000).toISOString(),
        dispatched_at: null,
      });
      await store.db.insertInto('events').values(event('evt_2037', 2_136_000_000)).execute();

      expect((await store.migrate()).applied).toContain('0010_events_created_bigint');
      await store.db.insertInto('events').values(event('evt_2040', CREATED)).execute();
      const rows = await store.db.selectFrom('events').select(['id', 'created']).orderBy('id').execute();
      expect(rows).toEqual([
        { id: 'evt_2037', created: 2_136_000_000 },
        { id: 'evt_2040', created: CREATED },
      ]);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
