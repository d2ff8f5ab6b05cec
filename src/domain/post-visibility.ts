import { type Expression, type SqlBool, sql } from 'kysely';
import { isAdmin } from './actor.js';
import type { Viewer } from './user-policies.js';

/**
 * Who sees a post: anyone once it is published (published_at set and not in the future); its author
 * and admins always. Drafts (null) and scheduled posts (future) are hidden from everyone else in
 * every read, list, count and search, and so are their comments: a hidden post does not exist for
 * that viewer (not_found), and nobody comments on a post they cannot see.
 */
export function mayViewPost(
  viewer: Viewer,
  post: { authorId: string; publishedAt: string | null },
  now: Date,
): boolean {
  if (post.publishedAt !== null && post.publishedAt <= now.toISOString()) return true;
  return viewer !== null && (isAdmin(viewer) || (viewer.kind === 'user' && viewer.id === post.authorId));
}

/**
 * The same rule as SQL on the posts table named `table` (or its alias); undefined when the viewer
 * sees everything (admins), so their queries stay as they were. Timestamps are ISO 8601 UTC text
 * with milliseconds on both engines, so text order is time order.
 */
export function visiblePostsSql(viewer: Viewer, now: Date, table = 'posts'): Expression<SqlBool> | undefined {
  if (viewer !== null && isAdmin(viewer)) return undefined;
  const publishedAt = sql.ref(`${table}.published_at`);
  const published = sql<SqlBool>`(${publishedAt} is not null and ${publishedAt} <= ${now.toISOString()})`;
  if (viewer === null || viewer.kind !== 'user') return published;
  return sql<SqlBool>`(${published} or ${sql.ref(`${table}.author_id`)} = ${viewer.id})`;
}

/** Comments (of the table or alias `table`) whose post the viewer sees; undefined for admins. */
export function commentsOfVisiblePostsSql(
  viewer: Viewer,
  now: Date,
  table = 'comments',
): Expression<SqlBool> | undefined {
  const visible = visiblePostsSql(viewer, now, 'vp');
  if (!visible) return undefined;
  return sql<SqlBool>`${sql.ref(`${table}.post_id`)} in (select vp.id from posts vp where ${visible})`;
}
