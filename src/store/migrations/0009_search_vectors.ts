import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * PostgreSQL: the searchable text of posts and comments as stored tsvector columns with GIN
 * indexes, replacing 0001's expression indexes. With only an expression index, every matching row
 * was parsed again for the recheck and again for `ts_rank`; a common word (one in most posts) meant
 * running the English parser over the whole table twice, seconds at 200,000 posts. A stored vector
 * is parsed once, on write. Users keep their expression index: handles and names are a few words.
 *
 * Both engines: a partial index of the deleted users, which every visibility condition probes
 * once per row (`authorLivesSql`): a small index, instead of the users table's key, so that a count
 * over a whole table stays cheap.
 */
export function searchVectors(dialect: Dialect) {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE INDEX users_deleted_idx ON users (id) WHERE deleted_at IS NOT NULL`.execute(db);
      if (dialect !== 'postgres') return;
      await sql`ALTER TABLE posts ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('english', title || ' ' || body)) STORED`.execute(db);
      await sql`ALTER TABLE comments ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('english', body)) STORED`.execute(db);
      await sql`DROP INDEX posts_fts_idx`.execute(db);
      await sql`DROP INDEX comments_fts_idx`.execute(db);
      await sql`CREATE INDEX posts_fts_idx ON posts USING gin (search_vector)`.execute(db);
      await sql`CREATE INDEX comments_fts_idx ON comments USING gin (search_vector)`.execute(db);
    },
  };
}
