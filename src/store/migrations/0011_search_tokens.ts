import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * PostgreSQL: the searchable text is tokenised the way the query is (and the way SQLite's
 * unicode61 tokeniser splits it), so the same words find the same rows on both engines.
 *
 * PostgreSQL's text-search parser keeps e-mail addresses, URLs, host and file names, version
 * numbers and signed numbers as single lexemes (`alice@example.org`, `readme.md`, `1.2.3`, `-42`),
 * while a query is split into letter/digit words (`searchTokens`): `README.md` became the query
 * `readme & md`, which never matched the stored `readme.md`. The text is now first put in NFC
 * (the query is normalised too, so text stored decomposed, `cafe` + U+0301, is found by `café`),
 * and every ASCII punctuation character is turned into a space before parsing. The characters are
 * listed (translate), not matched as "not alphanumeric": PostgreSQL's character classes follow the
 * database's ctype, under which non-ASCII letters may count as punctuation.
 *
 * Posts and comments: their stored `search_vector` columns (0009) are defined again (PostgreSQL 15
 * cannot change a generated column's expression, so each is dropped and added, which rewrites the
 * table under an exclusive lock, as 0009 did) with their GIN indexes. Users: the expression index
 * of 0001, whose expression the query repeats word for word. SQLite: nothing changes.
 */
const PUNCTUATION = `'!"#$%&''()*+,-./:;<=>?@[\\]^_\`{|}~'`;
const SPACES = `'${' '.repeat(32)}'`;

function searchable(text: string): string {
  return `translate(normalize(${text}, NFC), ${PUNCTUATION}, ${SPACES})`;
}

/**
 * The users' search vector as 0011 indexes it. The search query (src/domain/search.ts) repeats it
 * from here, since PostgreSQL uses an expression index only for the very same expression.
 */
export const USERS_SEARCH_VECTOR = `to_tsvector('simple', ${searchable(
  `handle || ' ' || coalesce(first_name, '') || ' ' || coalesce(last_name, '')`,
)})`;

export function searchTokensMigration(dialect: Dialect) {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'postgres') return;
      await sql
        .raw(
          `ALTER TABLE posts DROP COLUMN search_vector, ADD COLUMN search_vector tsvector
            GENERATED ALWAYS AS (to_tsvector('english', ${searchable(`title || ' ' || body`)})) STORED`,
        )
        .execute(db);
      await sql
        .raw(
          `ALTER TABLE comments DROP COLUMN search_vector, ADD COLUMN search_vector tsvector
            GENERATED ALWAYS AS (to_tsvector('english', ${searchable('body')})) STORED`,
        )
        .execute(db);
      await sql`CREATE INDEX posts_fts_idx ON posts USING gin (search_vector)`.execute(db);
      await sql`CREATE INDEX comments_fts_idx ON comments USING gin (search_vector)`.execute(db);
      await sql`DROP INDEX users_fts_idx`.execute(db);
      await sql.raw(`CREATE INDEX users_fts_idx ON users USING gin (${USERS_SEARCH_VECTOR})`).execute(db);
    },
  };
}
