import { type Expression, type Kysely, type SqlBool, sql } from 'kysely';
import type { Database, PostRow } from '../store/types.js';
import { QUALIFIED_POST_COLUMNS } from '../store/columns.js';
import { isAdmin } from './actor.js';
import type { Viewer } from './user-policies.js';

/**
 * Who sees a post: nobody once its author is deleted (D22: their content is missing for every
 * caller, admins included); otherwise anyone once it is published (published_at set and not in the
 * future), and its author and admins always. Drafts (null) and scheduled posts (future) are hidden
 * from everyone else in every read, list, count and search, and so are their comments: a hidden post
 * does not exist for that viewer (not_found), and nobody comments on a post they cannot see.
 */
export function mayViewPost(
  viewer: Viewer,
  post: { authorId: string; publishedAt: string | null; authorDeleted: boolean },
  now: Date,
): boolean {
  if (post.authorDeleted) return false;
  if (post.publishedAt !== null && post.publishedAt <= now.toISOString()) return true;
  return viewer !== null && (isAdmin(viewer) || (viewer.kind === 'user' && viewer.id === post.authorId));
}

/**
 * True when the user id in the column `authorColumn` (e.g. `posts.author_id`) names no deleted
 * user. Correlated on purpose: a primary-key probe per row. The uncorrelated `not in (select ...
 * where deleted_at is not null)` made both engines scan all of users on every read (deleted_at has
 * no index), which dominated list reads at 100k users.
 */
export function authorLivesSql(authorColumn: string): Expression<SqlBool> {
  return sql<SqlBool>`not exists (select 1 from users du where du.id = ${sql.ref(authorColumn)} and du.deleted_at is not null)`;
}

/**
 * The same rule as SQL on the posts table named `table` (or its alias). Timestamps are ISO 8601 UTC
 * text with milliseconds on both engines, so text order is time order.
 */
export function visiblePostsSql(viewer: Viewer, now: Date, table = 'posts'): Expression<SqlBool> {
  const lives = authorLivesSql(`${table}.author_id`);
  if (viewer !== null && isAdmin(viewer)) return lives;
  const publishedAt = sql.ref(`${table}.published_at`);
  const published = sql<SqlBool>`(${publishedAt} is not null and ${publishedAt} <= ${now.toISOString()})`;
  if (viewer === null || viewer.kind !== 'user') return sql<SqlBool>`(${lives} and ${published})`;
  return sql<SqlBool>`(${lives} and (${published} or ${sql.ref(`${table}.author_id`)} = ${viewer.id}))`;
}

/**
 * Comments (of the table or alias `table`) the viewer sees: their author is not deleted and their
 * post is one the viewer sees (whose author is not deleted either). The post test is correlated (a
 * primary-key probe per comment): as `post_id in (select ... from posts)` SQLite built the list of
 * every visible post for each comment read.
 *
 * `postId`, when every comment read is known to be of that one post (a page of its comments),
 * probes that post by value: the test is then the same for every row and runs once. The page's
 * statement bounds the post with a range rather than an equality (`child-lists.ts`), so PostgreSQL
 * would not carry the post id into a correlated probe and could merge-join the posts table instead.
 */
export function commentsOfVisiblePostsSql(
  viewer: Viewer,
  now: Date,
  table = 'comments',
  postId?: string,
): Expression<SqlBool> {
  const visible = visiblePostsSql(viewer, now, 'vp');
  const post = postId ?? sql.ref(`${table}.post_id`);
  return sql<SqlBool>`(${authorLivesSql(`${table}.author_id`)} and exists (select 1 from posts vp where vp.id = ${post} and ${visible}))`;
}

/** A post row as `readPostForViewing` reads it: with whether its author is deleted. */
export type SeenPost = PostRow & { authorDeleted: boolean };

/** `mayViewPost` of a row read by `readPostForViewing`. */
export function mayViewSeenPost(viewer: Viewer, seen: SeenPost, now: Date): boolean {
  return mayViewPost(
    viewer,
    { authorId: seen.author_id, publishedAt: seen.published_at, authorDeleted: seen.authorDeleted },
    now,
  );
}

/** One post with whether its author is deleted, for `mayViewSeenPost`; undefined when there is none. */
export async function readPostForViewing(db: Kysely<Database>, id: string): Promise<SeenPost | undefined> {
  const row = await db
    .selectFrom('posts')
    .leftJoin('users', 'users.id', 'posts.author_id')
    .select(QUALIFIED_POST_COLUMNS)
    .select('users.deleted_at as author_deleted_at')
    .where('posts.id', '=', id)
    .executeTakeFirst();
  if (!row) return undefined;
  const { author_deleted_at, ...post } = row;
  return { ...post, authorDeleted: author_deleted_at !== null };
}
