import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedQuery } from '../../src/store/fixed-query.js';
import { openStore, type Store } from '../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const now = new Date().toISOString();
const org = (id: string) => ({ id, name: `Org ${id}`, created_at: now, updated_at: now });

const byIdAndName = fixedQuery((db, id: string, name: string) =>
  db.selectFrom('organizations').select(['id', 'name']).where('name', '=', name).where('id', '=', id),
);

describe('fixedQuery (compiled once, run with new values)', () => {
  let database: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    database = await freshDatabase();
    store = openStore(database.url);
    await store.migrate();
    await store.db
      .insertInto('organizations')
      .values([org('org_a'), org('org_b')])
      .execute();
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  it('binds each call’s arguments to their own places, whatever the order in the SQL', async () => {
    expect(await byIdAndName(store.db, store.dialect, 'org_a', 'Org org_a')).toEqual([
      { id: 'org_a', name: 'Org org_a' },
    ]);
    expect(await byIdAndName(store.db, store.dialect, 'org_b', 'Org org_b')).toEqual([
      { id: 'org_b', name: 'Org org_b' },
    ]);
    expect(await byIdAndName(store.db, store.dialect, 'org_a', 'Org org_b')).toEqual([]);
  });

  it('runs inside the transaction it is given and sees its uncommitted rows', async () => {
    // The rows are read inside the transaction and checked outside it, where a failed expectation
    // cannot be mistaken for the deliberate rollback.
    const rollback = new Error('roll back');
    let seen: unknown;
    await expect(
      store.db.transaction().execute(async (trx) => {
        await trx.insertInto('organizations').values(org('org_c')).execute();
        seen = await byIdAndName(trx, store.dialect, 'org_c', 'Org org_c');
        throw rollback;
      }),
    ).rejects.toBe(rollback);
    expect(seen).toEqual([{ id: 'org_c', name: 'Org org_c' }]);
    expect(await byIdAndName(store.db, store.dialect, 'org_c', 'Org org_c')).toEqual([]);
  });

  it('refuses a builder that does not bind every argument', async () => {
    const bad = fixedQuery((db, _id: string) => db.selectFrom('organizations').select('id'));
    await expect(bad(store.db, store.dialect, 'org_a')).rejects.toThrow(/every argument/);
  });
});
