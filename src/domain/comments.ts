import { byIds } from './batch.js';
import type { CommentRow } from '../store/types.js';
import type { Actor } from './actor.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import { inTransaction } from './context.js';
import { notFound, Problems } from './errors.js';
import { newId } from './ids.js';
import {
  checkFirst,
  type Connection,
  firstPages,
  type KeyBound,
  type Order,
  type PageArgs,
  paginate,
} from './posts-connection.js';
import { assertAuthorExists, assertMayWriteAs, checkContent, checkId } from './posts-rules.js';

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

export interface AddCommentInput {
  body: string;
  authorId: string;
  postId: string;
}

/**
 * `Post.comments` reads as a conversation: oldest first (id ascending), so a page of new comments
 * pushed by the `commentAdded` subscription belongs after the last page a client holds.
 */
const COMMENT_ORDER: Order = 'asc';
const commentsScope = (postId: string) => `comments:${postId}`;

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
      const post = await tx.db
        .selectFrom('posts')
        .select('id')
        .where('id', '=', input.postId)
        .executeTakeFirst();
      if (!post) throw notFound('Post', input.postId);
      await assertAuthorExists(tx, input.authorId);
      await tx.db.insertInto('comments').values(row).execute();
      tx.afterCommit({ kind: 'comment.added', commentId: row.id, postId: row.post_id });
      return toComment(row);
    });
  }

  async get(id: string): Promise<Comment> {
    const row = await this.deps.store.db
      .selectFrom('comments')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Comment', id);
    return toComment(row);
  }

  /** Batch read for data loaders; missing ids are absent from the map. */
  getMany(ids: readonly string[]): Promise<Map<string, Comment>> {
    const db = this.deps.store.db;
    return byIds(
      ids,
      (unique) => db.selectFrom('comments').selectAll().where('id', 'in', unique).execute(),
      toComment,
    );
  }

  /** `Post.comments`: one post's comments, oldest first, 10 by default. */
  listByPost(postId: string, args: PageArgs = {}): Promise<Connection<Comment>> {
    return paginate(
      this.deps.cursors,
      {
        scope: commentsScope(postId),
        order: COMMENT_ORDER,
        defaultSize: COMMENTS_PAGE_SIZE,
        fetch: (bounds, order, limit) => this.fetch(postId, bounds, order, limit),
        count: async () => (await this.countByPosts([postId])).get(postId) ?? 0,
      },
      args,
      toComment,
    );
  }

  /**
   * First pages of `Post.comments` for many posts in two queries (a data loader's batch); the
   * cursors continue with `listByPost`.
   */
  async firstPagesByPosts(
    postIds: readonly string[],
    first?: number | null,
  ): Promise<Map<string, Connection<Comment>>> {
    const size = checkFirst(first, COMMENTS_PAGE_SIZE);
    const ids = [...new Set(postIds)];
    if (ids.length === 0) return new Map();
    const [rows, counts] = await Promise.all([
      this.deps.store.db
        .selectFrom((eb) =>
          eb
            .selectFrom('comments')
            .selectAll()
            .select((e) =>
              e.fn
                .agg<number>('row_number', [])
                .over((ob) => ob.partitionBy('post_id').orderBy('id', COMMENT_ORDER))
                .as('rn'),
            )
            .where('post_id', 'in', ids)
            .as('ranked'),
        )
        .selectAll()
        .where('rn', '<=', size + 1)
        .orderBy('post_id')
        .orderBy('id', COMMENT_ORDER)
        .execute(),
      this.countByPosts(ids),
    ]);
    return firstPages(this.deps.cursors, ids, rows, (r) => r.post_id, counts, size, commentsScope, toComment);
  }

  /** Comment counts of many posts; every asked id is in the map (no comments: 0). */
  async countByPosts(postIds: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>(postIds.map((id) => [id, 0]));
    if (postIds.length === 0) return out;
    const rows = await this.deps.store.db
      .selectFrom('comments')
      .select((eb) => ['post_id', eb.fn.countAll<number>().as('n')])
      .where('post_id', 'in', [...new Set(postIds)])
      .groupBy('post_id')
      .execute();
    for (const r of rows) out.set(r.post_id, Number(r.n));
    return out;
  }

  private fetch(postId: string, bounds: KeyBound[], order: Order, limit: number) {
    let q = this.deps.store.db.selectFrom('comments').selectAll().where('post_id', '=', postId);
    for (const b of bounds) q = q.where('id', b.op, b.id);
    return q.orderBy('id', order).limit(limit).execute();
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
