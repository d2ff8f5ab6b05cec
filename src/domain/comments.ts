import { byIds } from './batch.js';
import type { CommentRow } from '../store/types.js';
import { COMMENT_COLUMNS } from '../store/columns.js';
import type { Actor } from './actor.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import { inTransaction } from './context.js';
import { notFound, Problems } from './errors.js';
import { idFloor, isId, newId } from './ids.js';
import { ChildList } from './child-lists.js';
import type { Connection, PageArgs } from './connection.js';
import { commentsOfVisiblePostsSql, mayViewSeenPost, readPostForViewing } from './post-visibility.js';
import type { Viewer } from './user-policies.js';
import { assertAuthorExists, assertMayWriteAs, assertPostId, checkContent, checkId } from './posts-rules.js';

export const COMMENTS_PAGE_SIZE = 10;
export const MAX_COMMENT_LENGTH = 10_000;

export interface Comment {
  id: string;
  postId: string;
  authorId: string;
  body: string;
  createdAt: string;
  updatedAt: string;
}

/** A comment's identity and post, as its `comment.added` signal carries them. */
export interface CommentAddedRef {
  commentId: string;
  postId: string;
  createdAt: string;
}

/** How many posts one query of `addedSince` names at most (SQLite binds at most 999 values). */
const POSTS_PER_QUERY = 500;

export interface AddCommentInput {
  body: string;
  authorId: string;
  postId: string;
}

/**
 * `Post.comments` reads as a conversation: oldest first (id ascending), so a page of new comments
 * pushed by the `commentAdded` subscription belongs after the last page a client holds.
 */
const commentsByPost = new ChildList({
  table: 'comments',
  parent: 'post_id',
  order: 'asc',
  defaultSize: COMMENTS_PAGE_SIZE,
  scope: (postId) => `comments:${postId}`,
});

export class CommentService {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * Adds a comment to an existing post. Comments have no webhook event type, so nothing goes to the
   * outbox; subscribers learn of it from the `comment.added` signal sent after commit.
   */
  async add(actor: Actor, input: AddCommentInput): Promise<Comment> {
    const problems = new Problems();
    checkContent(input.body, 'body', MAX_COMMENT_LENGTH, problems);
    checkId(input.authorId, 'authorId', problems);
    checkId(input.postId, 'postId', problems);
    problems.throwIfAny();
    assertMayWriteAs(actor, input.authorId);
    assertPostId(input.postId);

    const now = this.deps.clock.now();
    const row: CommentRow = {
      id: newId('cmt', now.getTime()),
      post_id: input.postId,
      author_id: input.authorId,
      body: input.body,
      created_at: iso(now),
      updated_at: iso(now),
    };
    return inTransaction(this.deps, async (tx) => {
      // A post the actor may not see does not exist for them: the same not_found as a missing one.
      const post = await readPostForViewing(tx.db, input.postId);
      if (!post || !mayViewSeenPost(actor, post, now)) throw notFound('Post', input.postId);
      await assertAuthorExists(tx, input.authorId);
      await tx.db.insertInto('comments').values(row).execute();
      tx.afterCommit({ kind: 'comment.added', commentId: row.id, postId: row.post_id });
      return toComment(row);
    });
  }

  /** One comment as `viewer` sees it: a comment on a post hidden from them is not_found. */
  async get(viewer: Viewer, id: string): Promise<Comment> {
    // Not a comment id: no comment, on every engine alike, and not echoed (see assertPostId).
    if (!isId(id, 'cmt')) throw notFound('Comment');
    const row = await this.deps.store.db
      .selectFrom('comments')
      .select(COMMENT_COLUMNS)
      .where('id', '=', id)
      .where(this.visible(viewer))
      .executeTakeFirst();
    if (!row) throw notFound('Comment', id);
    return toComment(row);
  }

  /**
   * The comments added to any of `postIds` from `sinceMs` on (epoch milliseconds, by their
   * time-ordered ids), oldest first; when there are more than `limit`, the newest `limit`. For a
   * reader that missed their `comment.added` signals (the GraphQL subscriptions of an instance
   * whose broadcast was interrupted): like the signals, this tells only which comments exist and
   * where, never what they say, and each is then read with `get` as the viewer it is for, which
   * applies the visibility rules exactly as for a signal heard live. A string that cannot be a post
   * id names no post and is not read (as in `byIds`): a subscription may name any string, and one
   * PostgreSQL refuses (NUL) must not fail the read for every other post.
   */
  async addedSince(postIds: readonly string[], sinceMs: number, limit: number): Promise<CommentAddedRef[]> {
    const unique = [...new Set(postIds)].filter((id) => isId(id, 'pst'));
    const floor = idFloor('cmt', sinceMs);
    const found: CommentAddedRef[] = [];
    for (let i = 0; i < unique.length; i += POSTS_PER_QUERY) {
      const rows = await this.deps.store.db
        .selectFrom('comments')
        .select(['id', 'post_id', 'created_at'])
        .where('post_id', 'in', unique.slice(i, i + POSTS_PER_QUERY))
        .where('id', '>=', floor)
        .orderBy('id', 'desc')
        .limit(limit)
        .execute();
      for (const r of rows) found.push({ commentId: r.id, postId: r.post_id, createdAt: r.created_at });
    }
    found.sort((a, b) => (a.commentId < b.commentId ? -1 : a.commentId > b.commentId ? 1 : 0));
    return found.slice(-limit);
  }

  /** Batch read for data loaders; missing and hidden ids are absent from the map. */
  getMany(viewer: Viewer, ids: readonly string[]): Promise<Map<string, Comment>> {
    const db = this.deps.store.db;
    const visible = this.visible(viewer);
    return byIds(
      ids,
      'cmt',
      (unique) => {
        return db
          .selectFrom('comments')
          .select(COMMENT_COLUMNS)
          .where('id', 'in', unique)
          .where(visible)
          .execute();
      },
      toComment,
    );
  }

  /**
   * `Post.comments`: one post's comments, oldest first, 10 by default; `first`/`after` forward,
   * `last`/`before` backward. A post hidden from `viewer` answers as a missing one: an empty
   * connection with totalCount 0.
   */
  listByPost(viewer: Viewer, postId: string, args: PageArgs = {}): Promise<Connection<Comment>> {
    return commentsByPost.page(
      this.deps.cursors,
      this.deps.store.db,
      postId,
      args,
      toComment,
      this.visible(viewer, postId),
    );
  }

  /**
   * First pages of `Post.comments` for many posts in two queries (a data loader's batch); the
   * cursors continue with `listByPost`. Posts hidden from `viewer` get an empty connection.
   */
  firstPagesByPosts(
    viewer: Viewer,
    postIds: readonly string[],
    first?: number | null,
  ): Promise<Map<string, Connection<Comment>>> {
    return commentsByPost.firstPages(
      this.deps.cursors,
      this.deps.store.db,
      postIds,
      first,
      toComment,
      this.visible(viewer),
    );
  }

  /** Comment counts of many posts; every asked id is in the map (none, or hidden: 0). */
  countByPosts(viewer: Viewer, postIds: readonly string[]): Promise<Map<string, number>> {
    return commentsByPost.countBy(this.deps.store.db, postIds, this.visible(viewer));
  }

  /** Whether `viewer` may see the post's comments (and the post), for subscriptions filtering by post. */
  async mayViewPostOf(viewer: Viewer, postId: string): Promise<boolean> {
    if (!isId(postId, 'pst')) return false;
    const row = await readPostForViewing(this.deps.store.db, postId);
    return row !== undefined && mayViewSeenPost(viewer, row, this.deps.clock.now());
  }

  /** Comments `viewer` sees; `postId` when all of them are of that post (`commentsOfVisiblePostsSql`). */
  private visible(viewer: Viewer, postId?: string) {
    return commentsOfVisiblePostsSql(viewer, this.deps.clock.now(), 'comments', postId);
  }
}

export function toComment(row: CommentRow): Comment {
  return {
    id: row.id,
    postId: row.post_id,
    authorId: row.author_id,
    body: row.body,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
