import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/domain/clock.js';
import { inTransaction, type CoreDeps } from '../../src/domain/context.js';
import { CursorCodec } from '../../src/domain/cursor.js';
import { commentsOfVisiblePostsSql, visiblePostsSql } from '../../src/domain/post-visibility.js';
import { postgresSearchQuery, sqliteSearchQuery } from '../../src/domain/search.js';
import { DomainBus, type DomainSignal } from '../../src/events/bus.js';
import { isForeignKeyViolation, isUniqueViolation } from '../../src/store/errors.js';
import { migrationsFor } from '../../src/store/migrations/index.js';
import { openStore, type Store } from '../../src/store/store.js';
import { freshDatabase, testDialect, type TestDatabase } from '../helpers/database.js';

/** Every registered migration, in order (the names do not depend on the dialect). */
const MIGRATIONS = Object.keys(migrationsFor('sqlite'));

const now = () => new Date().toISOString();
const org = (id: string) => ({ id, name: `Org ${id}`, created_at: now(), updated_at: now() });
const user = (id: string, organizationId: string) => ({
  id,
  organization_id: organizationId,
  handle: id.toLowerCase().replace(/[^a-z0-9]/g, ''),
  email: `${id.toLowerCase().replace(/[^a-z0-9]/g, '')}@example.com`,
  first_name: null,
  last_name: null,
  role: 'member' as const,
  password_hash: null,
  email_verified_at: null,
  created_at: now(),
  updated_at: now(),
  deleted_at: null,
});

const EXPECTED_TABLES = [
  'api_keys',
  'authorization_codes',
  'comments',
  'coupons',
  'delivery_attempts',
  'events',
  'idempotency_records',
  'oauth_clients',
  'order_items',
  'orders',
  'organizations',
  'persisted_queries',
  'post_tags',
  'posts',
  'products',
  'refresh_token_families',
  'refresh_tokens',
  'refunds',
  'settings',
  'signing_keys',
  'tags',
  'used_login_tickets',
  'users',
  'webhook_deliveries',
  'webhook_endpoints',
];

async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected the statement to fail');
    },
    (e: unknown) => e,
  );
}

describe(`store on ${testDialect()}`, () => {
  let database: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    database = await freshDatabase();
    store = openStore(database.url);
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  it('applies the migrations on a fresh database, then applies nothing the second time', async () => {
    expect((await store.migrate()).applied).toEqual(MIGRATIONS);
    expect(await store.migrate()).toEqual({ applied: [], newer: [] });
    const tables = (await store.db.introspection.getTables()).map((t) => t.name);
    for (const table of EXPECTED_TABLES) expect(tables, table).toContain(table);
    await store.ping();
  });

  it('tells onAnswer listeners of every statement the database answered, and of no failed one', async () => {
    let answers = 0;
    const stop = store.onAnswer(() => (answers += 1));
    await store.ping();
    await store.db.selectFrom('users').select('id').execute();
    await store.db.transaction().execute(async (trx) => {
      await trx.selectFrom('users').select('id').execute();
    });
    expect(answers).toBe(3);
    await rejectionOf(sql`select * from no_such_table`.execute(store.db));
    expect(answers).toBe(3);
    stop();
    await store.ping();
    expect(answers).toBe(3);
  });

  it('enforces foreign keys', async () => {
    const err = await rejectionOf(
      store.db.insertInto('users').values(user('usr_fk', 'org_missing')).execute(),
    );
    expect(isForeignKeyViolation(err)).toBe(true);
  });

  it('recognises unique violations on this engine', async () => {
    await store.db.insertInto('organizations').values(org('org_unique')).execute();
    const err = await rejectionOf(store.db.insertInto('organizations').values(org('org_unique')).execute());
    expect(isUniqueViolation(err)).toBe(true);
    expect(isForeignKeyViolation(err)).toBe(false);
  });

  it('cascades a post deletion to its comments and tag links', async () => {
    await store.db.insertInto('organizations').values(org('org_cascade')).execute();
    await store.db.insertInto('users').values(user('usr_cascade', 'org_cascade')).execute();
    await store.db
      .insertInto('posts')
      .values({
        id: 'pst_c',
        author_id: 'usr_cascade',
        title: 't',
        body: 'b',
        published_at: null,
        created_at: now(),
        updated_at: now(),
      })
      .execute();
    await store.db.insertInto('tags').values({ name: 'cascade', created_at: now() }).execute();
    await store.db.insertInto('post_tags').values({ post_id: 'pst_c', tag_name: 'cascade' }).execute();
    await store.db
      .insertInto('comments')
      .values({
        id: 'cmt_c',
        post_id: 'pst_c',
        author_id: 'usr_cascade',
        body: 'c',
        created_at: now(),
        updated_at: now(),
      })
      .execute();
    await store.db.deleteFrom('posts').where('id', '=', 'pst_c').execute();
    expect(
      await store.db.selectFrom('comments').select('id').where('post_id', '=', 'pst_c').execute(),
    ).toEqual([]);
    expect(
      await store.db.selectFrom('post_tags').selectAll().where('post_id', '=', 'pst_c').execute(),
    ).toEqual([]);
  });

  it('rolls back every write of a transaction that throws, and sends none of its signals', async () => {
    const bus = new DomainBus();
    const seen: DomainSignal[] = [];
    bus.on('user.changed', (s) => seen.push(s));
    bus.on('event.recorded', (s) => seen.push(s));
    const deps: CoreDeps = { store, clock: systemClock, bus, cursors: new CursorCodec(randomBytes(32)) };
    const eventsBefore = await store.db.selectFrom('events').select('id').execute();

    await expect(
      inTransaction(deps, async (tx) => {
        await tx.db.insertInto('organizations').values(org('org_rollback')).execute();
        await tx.db.insertInto('users').values(user('usr_rollback', 'org_rollback')).execute();
        await tx.recordEvent('user.updated', 'usr_rollback', { note: 'never' });
        tx.afterCommit({ kind: 'user.changed', userId: 'usr_rollback' });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');

    expect(
      await store.db.selectFrom('organizations').select('id').where('id', '=', 'org_rollback').execute(),
    ).toEqual([]);
    expect(
      await store.db.selectFrom('users').select('id').where('id', '=', 'usr_rollback').execute(),
    ).toEqual([]);
    expect(await store.db.selectFrom('events').select('id').execute()).toEqual(eventsBefore);
    expect(seen).toEqual([]);

    // The same work without the throw commits everything and signals afterwards.
    await inTransaction(deps, async (tx) => {
      await tx.db.insertInto('organizations').values(org('org_commit')).execute();
      await tx.recordEvent('user.updated', null, { note: 'kept' });
      tx.afterCommit({ kind: 'user.changed', userId: 'usr_x' });
    });
    expect(
      await store.db.selectFrom('organizations').select('id').where('id', '=', 'org_commit').execute(),
    ).toHaveLength(1);
    expect(seen.map((s) => s.kind)).toEqual(['event.recorded', 'user.changed']);
  });

  it('fails a transaction with the error that ended it, when the engine had rolled it back itself', async () => {
    // RAISE(ROLLBACK) on SQLite and an exception on PostgreSQL end the transaction in the engine,
    // as a full disk or a read-only file does; the ROLLBACK that follows must not hide why.
    if (database.dialect === 'sqlite') {
      await sql`create trigger refuse_org before insert on organizations when new.name = 'Refused'
        begin select raise(rollback, 'refused by the trigger'); end`.execute(store.db);
    } else {
      await sql`create function refuse_org() returns trigger language plpgsql as $$
        begin if new.name = 'Refused' then raise exception 'refused by the trigger'; end if; return new; end $$`.execute(
        store.db,
      );
      await sql`create trigger refuse_org before insert on organizations for each row execute function refuse_org()`.execute(
        store.db,
      );
    }
    try {
      const err = await rejectionOf(
        store.db.transaction().execute(async (trx) => {
          await trx.insertInto('organizations').values(org('org_kept_out_1')).execute();
          await trx
            .insertInto('organizations')
            .values({ ...org('org_kept_out_2'), name: 'Refused' })
            .execute();
        }),
      );
      expect((err as Error).message).toMatch(/refused by the trigger/);
      const kept = await store.db
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', ['org_kept_out_1', 'org_kept_out_2'])
        .execute();
      expect(kept).toEqual([]);
    } finally {
      await sql`drop trigger refuse_org${database.dialect === 'postgres' ? sql` on organizations` : sql``}`.execute(
        store.db,
      );
    }
  });

  it('keeps ISO timestamps as given, so lexical order is time order', async () => {
    const at = '2026-03-04T05:06:07.089Z';
    await store.db
      .insertInto('organizations')
      .values({ id: 'org_time', name: 'T', created_at: at, updated_at: at })
      .execute();
    const row = await store.db
      .selectFrom('organizations')
      .selectAll()
      .where('id', '=', 'org_time')
      .executeTakeFirstOrThrow();
    expect(row.created_at).toBe(at);
  });

  it.runIf(testDialect() === 'postgres')('answers search from the GIN indexes, parsing no text', async () => {
    // On a tiny table the planner prefers a sequential scan; forbidding it shows whether the
    // search expressions match the indexed ones at all.
    const plan = await store.db.connection().execute(async (conn) => {
      await sql`set enable_seqscan = off`.execute(conn);
      try {
        const compiled = postgresSearchQuery(['engine'], 10).compile(conn);
        const result = await conn.executeQuery<{ 'QUERY PLAN': string }>({
          ...compiled,
          sql: `explain ${compiled.sql}`,
        });
        return result.rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        await sql`set enable_seqscan = on`.execute(conn);
      }
    });
    expect(plan).toContain('posts_fts_idx');
    expect(plan).toContain('comments_fts_idx');
    expect(plan).toContain('users_fts_idx');
    // Posts and comments match and rank on their stored vectors: parsing the text at query time
    // (the index recheck, ts_rank) is what made a common word cost seconds on a large table.
    expect(plan).not.toMatch(/to_tsvector\('english'/);
    expect(plan).toMatch(/ts_rank\(p\.search_vector/);
    expect(plan).toMatch(/ts_rank\(c\.search_vector/);
  });

  it.runIf(testDialect() === 'sqlite')(
    'lets FTS5 MATCH drive search and reads no table in full',
    async () => {
      const now = new Date();
      const visible = {
        users: sql<boolean>`1 = 1`,
        posts: visiblePostsSql(null, now, 'p'),
        comments: commentsOfVisiblePostsSql(null, now, 'c'),
      } as const;
      const compiled = sqliteSearchQuery(['engine'], 10, visible).compile(store.db);
      const plan = await store.db.executeQuery<{ detail: string }>({
        ...compiled,
        sql: `explain query plan ${compiled.sql}`,
      });
      const details = plan.rows.map((r) => r.detail);
      expect(details[0]).toMatch(/^SCAN search_index VIRTUAL TABLE/);
      // A list of every visible post or comment, built before the first hit is read, is a scan of
      // that table however few rows match (the deleted users are read from their partial index).
      expect(details.filter((d) => /^SCAN (p|c|vp|posts|comments|users)\b/.test(d))).toEqual([]);
    },
  );

  it.runIf(testDialect() === 'sqlite')(
    'keeps the FTS5 index in step with inserts, updates and deletes',
    async () => {
      await store.db.insertInto('organizations').values(org('org_fts')).execute();
      await store.db.insertInto('users').values(user('usr_fts', 'org_fts')).execute();
      const indexed = async () =>
        (
          await sql<{
            entity_id: string;
          }>`select entity_id from search_index where search_index match 'zeppelin'`.execute(store.db)
        ).rows.map((r) => r.entity_id);
      await store.db
        .insertInto('posts')
        .values({
          id: 'pst_fts',
          author_id: 'usr_fts',
          title: 'zeppelin',
          body: 'b',
          published_at: null,
          created_at: now(),
          updated_at: now(),
        })
        .execute();
      expect(await indexed()).toEqual(['pst_fts']);
      await store.db.updateTable('posts').set({ title: 'blimp' }).where('id', '=', 'pst_fts').execute();
      expect(await indexed()).toEqual([]);
      await store.db
        .updateTable('posts')
        .set({ body: 'zeppelin again' })
        .where('id', '=', 'pst_fts')
        .execute();
      expect(await indexed()).toEqual(['pst_fts']);
      await store.db.deleteFrom('posts').where('id', '=', 'pst_fts').execute();
      expect(await indexed()).toEqual([]);
    },
  );

  it.runIf(testDialect() === 'postgres')('reports pool figures for /metrics', () => {
    const stats = store.poolStats();
    expect(stats).toBeDefined();
    expect(stats!.total).toBeGreaterThanOrEqual(stats!.idle);
  });
});

describe('SQLite file databases', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-store-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('use WAL journaling, foreign keys and a busy timeout, and create missing directories', async () => {
    const store = openStore(`sqlite:${join(dir, 'nested', 'dir', 'atrium.db')}`);
    try {
      const pragma = async (name: string) =>
        Object.values(
          (await sql.raw(`pragma ${name}`).execute(store.db)).rows[0] as Record<string, unknown>,
        )[0];
      expect(String(await pragma('journal_mode')).toLowerCase()).toBe('wal');
      expect(Number(await pragma('foreign_keys'))).toBe(1);
      expect(Number(await pragma('busy_timeout'))).toBe(5000);
      expect((await store.migrate()).applied).toEqual(MIGRATIONS);
      expect(store.poolStats()).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('keep data across reopening, and migrations stay applied', async () => {
    const path = `sqlite:${join(dir, 'reopen.db')}`;
    const first = openStore(path);
    await first.migrate();
    await first.db.insertInto('organizations').values(org('org_persist')).execute();
    await first.close();
    const second = openStore(path);
    try {
      expect(await second.migrate()).toEqual({ applied: [], newer: [] });
      expect(await second.db.selectFrom('organizations').select('id').execute()).toEqual([
        { id: 'org_persist' },
      ]);
    } finally {
      await second.close();
    }
  });

  it('enforce foreign keys in memory too', async () => {
    const store = openStore('sqlite::memory:');
    try {
      await store.migrate();
      const err = await rejectionOf(
        store.db.insertInto('users').values(user('usr_mem', 'org_none')).execute(),
      );
      expect(isForeignKeyViolation(err)).toBe(true);
    } finally {
      await store.close();
    }
  });
});
