import { type Expression, type SqlBool, sql } from 'kysely';
import type { CoreDeps } from './context.js';
import { Problems } from './errors.js';
import { checkText } from './validate.js';
import { commentsOfVisiblePostsSql, visiblePostsSql } from './post-visibility.js';
import { maySearchUsers, type Viewer } from './user-policies.js';
import { readCancellable } from '../store/cancellable.js';
import { USERS_SEARCH_VECTOR } from '../store/migrations/0011_search_tokens.js';
import { currentRequestScope } from './request-scope.js';

export type SearchKind = 'user' | 'post' | 'comment';

export interface SearchHit {
  kind: SearchKind;
  id: string;
  /** Higher is more relevant; comparable only within one result list. */
  score: number;
}

export const SEARCH_DEFAULT_LIMIT = 20;
export const SEARCH_MAX_LIMIT = 100;
const MAX_TOKENS = 16;
const MAX_TOKEN_LENGTH = 64;

/**
 * The words of a user's query: letters and digits only, lower-case, at most 16. Every other
 * character (quotes, `*`, parentheses, `-`, `.`, `@`, `:`) separates words, so no user input can
 * reach the query syntax of either engine. The stored text is split the same way: SQLite's
 * unicode61 tokeniser ends a word at every such character, and on PostgreSQL the indexed text has
 * its ASCII punctuation turned into spaces first (migration 0011), so `README.md` is the words
 * `readme md` on both sides of either engine.
 *
 * Lower-casing is per character, as PostgreSQL's is: `İ` becomes a plain `i` (JavaScript's
 * `toLowerCase` gives `i` + U+0307, a mark PostgreSQL's lexeme does not hold) and a word-final
 * `Σ` becomes `σ`, not `ς`. SQLite drops marks and folds `ς` either way, so this changes nothing
 * there. Other marks stay: PostgreSQL keeps them in its lexemes.
 */
export function searchTokens(query: string): string[] {
  const words = lowerPerCharacter(query.normalize('NFKC')).match(/[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu) ?? [];
  return words.slice(0, MAX_TOKENS).map((w) => w.slice(0, MAX_TOKEN_LENGTH));
}

function lowerPerCharacter(text: string): string {
  return Array.from(text, (c) => (c === '\u0130' ? 'i' : c.toLowerCase())).join('');
}

/**
 * An FTS5 query matching rows that contain every word. Each word is a quoted string, so words
 * such as AND, OR, NOT or NEAR are plain words, never operators.
 */
export function ftsMatchExpression(tokens: readonly string[]): string {
  return tokens.map((t) => `"${t.replaceAll('"', '""')}"`).join(' ');
}

/**
 * Full-text search over users (handle and name), posts (title and body) and comments (body), in
 * each engine's own facility: the FTS5 table on SQLite, the expression GIN indexes on PostgreSQL.
 * Every word must match; hits are ranked by relevance (bm25 / ts_rank), newest first on ties.
 */
export class SearchService {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * Hits `viewer` may see: drafts and scheduled posts (and their comments) only for their author and
   * admins, as everywhere else; nothing by a deleted author (D22); users only for a caller who may
   * list them and whose credentials grant `users:read` (`maySearchUsers`). `scopes` are the
   * credentials' scopes; absent for a caller not limited by scopes (the operator, the CLI).
   * `signal` aborts when the request is abandoned: on PostgreSQL the statement is then cancelled
   * (`readCancellable`) rather than left running after the caller was answered.
   */
  async search(
    viewer: Viewer,
    query: string,
    limit: number = SEARCH_DEFAULT_LIMIT,
    scopes?: ReadonlySet<string> | null,
    signal?: AbortSignal,
  ): Promise<SearchHit[]> {
    const problems = new Problems();
    if (typeof query !== 'string') problems.add('query', 'query must be a string');
    // The core's text rule (checkText) for the query's characters, whatever its length: NUL and
    // the other control characters are refused on every engine alike. Left to the engines, NUL
    // would only separate words, while PostgreSQL's guard refuses any text holding it.
    else {
      const bad = checkText(query, 0, Number.MAX_SAFE_INTEGER);
      if (bad) problems.add('query', `query ${bad}`, 'invalid_characters');
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) {
      problems.add('limit', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}`, 'range_error');
    }
    problems.throwIfAny();
    const tokens = searchTokens(query);
    if (tokens.length === 0) return [];
    const now = this.deps.clock.now();
    const visible: Visible = {
      users: maySearchUsers(viewer, scopes) ? ALL : NONE,
      posts: visiblePostsSql(viewer, now, 'p'),
      comments: commentsOfVisiblePostsSql(viewer, now, 'c'),
    };
    const query_ =
      this.deps.store.dialect === 'sqlite'
        ? sqliteSearchQuery(tokens, limit, visible)
        : postgresSearchQuery(tokens, limit, visible);
    // Yoga's POST path gives the resolver the fetch Request's signal (the client going away) and
    // runs in the request scope, whose signal carries the deadline: either one abandons the read.
    const rows = await readCancellable(this.deps.store, query_, [signal, currentRequestScope()?.signal]);
    return rows.map((r) => ({ kind: r.kind, id: r.id, score: Number(r.score) }));
  }
}

type HitRow = { kind: SearchKind; id: string; score: number };

/** Whether users are hits at all, and conditions on posts (alias `p`) and comments (alias `c`). */
export interface Visible {
  users: Expression<SqlBool>;
  posts: Expression<SqlBool>;
  comments: Expression<SqlBool>;
}

const ALL = sql<SqlBool>`1 = 1`;
const NONE = sql<SqlBool>`1 = 0`;
/** No restriction (a test's plan check; every viewer, admins too, has conditions). */
export const EVERYTHING: Visible = { users: ALL, posts: ALL, comments: ALL };

/**
 * bm25() is lower-is-better; deleted users stay in the index (a soft delete is an update). MATCH
 * drives the statement; each hit's row is then looked up by its key (correlated EXISTS), rather than
 * comparing hits with lists of every visible post and comment, which SQLite would build in full.
 */
export function sqliteSearchQuery(tokens: readonly string[], limit: number, visible: Visible = EVERYTHING) {
  return sql<HitRow>`
    select kind, entity_id as id, -bm25(search_index) as score
    from search_index
    where search_index match ${ftsMatchExpression(tokens)}
      and (kind <> 'user' or (${visible.users} and not exists (select 1 from users u where u.id = search_index.entity_id and u.deleted_at is not null)))
      and (kind <> 'post' or exists (select 1 from posts p where p.id = search_index.entity_id and ${visible.posts}))
      and (kind <> 'comment' or exists (select 1 from comments c where c.id = search_index.entity_id and ${visible.comments}))
    order by score desc, entity_id desc
    limit ${limit}`;
}

/**
 * The expression of the users' GIN index, from the migration that made it: the planner uses the
 * index only for the very same expression.
 */
const USER_VECTOR = sql.raw(USERS_SEARCH_VECTOR);

/**
 * Posts and comments match and rank on their stored `search_vector` (migrations 0009 and 0011), so
 * neither the index recheck nor `ts_rank` parses the text again; users on the expression of their
 * GIN index (migration 0011), written exactly as indexed. Each branch ranks and limits its own matches before
 * the union. A test holds the plan to the indexes and to no parsing at query time.
 */
export function postgresSearchQuery(tokens: readonly string[], limit: number, visible: Visible = EVERYTHING) {
  const text = tokens.join(' ');
  return sql<HitRow>`
    select kind, id, score from (
      (select 'user' as kind, u.id, ts_rank(${USER_VECTOR}, q) as score
       from users u, plainto_tsquery('simple', ${text}) q
       where ${USER_VECTOR} @@ q
         and u.deleted_at is null
         and ${visible.users}
       order by score desc, u.id desc limit ${limit})
      union all
      (select 'post' as kind, p.id, ts_rank(p.search_vector, q) as score
       from posts p, plainto_tsquery('english', ${text}) q
       where p.search_vector @@ q
         and ${visible.posts}
       order by score desc, p.id desc limit ${limit})
      union all
      (select 'comment' as kind, c.id, ts_rank(c.search_vector, q) as score
       from comments c, plainto_tsquery('english', ${text}) q
       where c.search_vector @@ q
         and ${visible.comments}
       order by score desc, c.id desc limit ${limit})
    ) hits
    order by score desc, id desc
    limit ${limit}`;
}
