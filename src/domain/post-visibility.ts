import { type Actor, isAdmin } from './actor.js';
import { iso } from './clock.js';

/**
 * Draft and scheduled posts (and so their comments) are visible only to their author and to admins;
 * a published post to everyone. One rule for every surface; `viewer` is null for an anonymous caller.
 */
export function mayReadPost(
  viewer: Actor | null,
  post: { authorId: string; publishedAt: string | null },
  now: Date,
): boolean {
  if (post.publishedAt !== null && post.publishedAt <= iso(now)) return true;
  return viewer !== null && (isAdmin(viewer) || (viewer.kind === 'user' && viewer.id === post.authorId));
}
