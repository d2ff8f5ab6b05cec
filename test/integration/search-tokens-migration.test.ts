import { Migrator } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresSearchQuery, searchTokens, sqliteSearchQuery } from '../../src/domain/search.js';
import { migrationsFor } from '../../src/store/migrations/index.js';
import { openStore, type Store } from '../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const at = '2026-01-01T00:00:00.000Z';

/**
 * Rows written before migration 0011 are found by their punctuated words after it: on PostgreSQL
 * 0011 defines the stored vectors and the users' index again, and every existing row is parsed
 * anew (on SQLite it changes nothing, and the rows are found as before).
 */
describe('migration 0011_search_tokens', () => {
  let database: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    database = await freshDatabase();
    store = openStore(database.url);
    const before = Object.fromEntries(
      Object.entries(migrationsFor(store.dialect)).filter(([name]) => name < '0010'),
    );
    const { error } = await new Migrator({
      db: store.db,
      provider: { getMigrations: async () => before },
    }).migrateToLatest();
    if (error) throw error instanceof Error ? error : new Error(String(error));
    await store.db
      .insertInto('organizations')
      .values({ id: 'org_m', name: 'M', created_at: at, updated_at: at })
      .execute();
    await store.db
      .insertInto('users')
      .values({
        id: 'usr_m',
        organization_id: 'org_m',
        handle: 'john-2024',
        email: 'john@example.com',
        first_name: 'İlker',
        last_name: null,
        role: 'member',
        password_hash: null,
        email_verified_at: null,
        created_at: at,
        updated_at: at,
        deleted_at: null,
      })
      .execute();
    await store.db
      .insertInto('posts')
      .values({
        id: 'pst_m',
        author_id: 'usr_m',
        title: 'Cafe\u0301 notes',
        body: 'Read README.md, mail alice@example.org',
        published_at: at,
        created_at: at,
        updated_at: at,
      })
      .execute();
    await store.db
      .insertInto('comments')
      .values({
        id: 'cmt_m',
        post_id: 'pst_m',
        author_id: 'usr_m',
        body: 'node.js v20.1',
        created_at: at,
        updated_at: at,
      })
      .execute();
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  it('applies, and the rows written before it are found by the words the query splits them into', async () => {
    expect((await store.migrate()).applied).toContain('0011_search_tokens');
    const hits = async (q: string) => {
      const tokens = searchTokens(q);
      const query =
        store.dialect === 'sqlite' ? sqliteSearchQuery(tokens, 10) : postgresSearchQuery(tokens, 10);
      return (await query.execute(store.db)).rows.map((r) => r.id).sort();
    };
    expect(await hits('README.md')).toEqual(['pst_m']);
    expect(await hits('alice@example.org')).toEqual(['pst_m']);
    expect(await hits('café')).toEqual(['pst_m']);
    expect(await hits('node.js v20.1')).toEqual(['cmt_m']);
    expect(await hits('john-2024')).toEqual(['usr_m']);
    expect(await hits('İlker')).toEqual(['usr_m']);
  });
});
