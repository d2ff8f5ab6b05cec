import { byIds } from './batch.js';
import type { PostRow } from '../store/types.js';
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
import {
  assertAuthorExists,
  assertMayChange,
  assertMayWriteAs,
  checkContent,
  checkId,
  readDateTime,
} from './posts-rules.js';
import { normaliseTags, replacePostTags, type TagService } from './tags.js';

export const POSTS_PAGE_SIZE = 20;

export interface Post {
  id: string;
  authorId: string;
  title: string;
  body: string;
  publishedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface PostWithTags extends Post {
  tags: string[];
}

export interface CreatePostInput {
  title: string;
  body: string;
  authorId: string;
  /** Omitted: published now. null: a draft. A date-time: published (or scheduled) then. */
  publishAt?: string | Date | null | undefined;
  tags?: readonly string[] | null | undefined;
}

/** The spec's `UpdatePostInput`: every field optional; `tags` replaces the whole set. */
export interface UpdatePostInput {
  title?: string | undefined;
  body?: string | undefined;
  publishAt?: string | Date | null | undefined;
  tags?: readonly string[] | null | undefined;
}

const POSTS_SCOPE = 'posts';
const authorScope = (authorId: string) => `posts:author:${authorId}`;

/**
 * Posts: writing (author or admin), reading one or many (for data loaders), and cursor
 * connections newest first. Validation problems are thrown together as one validation_error with
 * field details, which the GraphQL surface turns into the payload's `errors` list.
 */
export class PostService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly tags: TagService,
  ) {}

  async create(actor: Actor, input: CreatePostInput): Promise<PostWithTags> {
    const problems = new Problems();
    checkTitleAndBody(input, problems, true);
    checkId(input.authorId, 'authorId', problems);
    const publishedAt =
      input.publishAt === undefined ? undefined : readDateTime(input.publishAt, 'publishAt', problems);
    const tags = input.tags == null ? [] : normaliseTags(input.tags, problems);
    problems.throwIfAny();
    assertMayWriteAs(actor, input.authorId);

    const now = this.deps.clock.now();
    const row: PostRow = {
      id: newId('pst', now.getTime()),
      author_id: input.authorId,
      title: input.title.trim(),
      body: input.body,
      published_at: publishedAt === undefined ? iso(now) : publishedAt,
      created_at: iso(now),
      updated_at: iso(now),
    };
    return inTransaction(this.deps, async (tx) => {
      await assertAuthorExists(tx, input.authorId);
      await tx.db.insertInto('posts').values(row).execute();
      await replacePostTags(tx.db, row.id, tags, row.created_at);
      tx.afterCommit({ kind: 'post.changed', postId: row.id });
      return { ...toPost(row), tags: [...tags].sort() };
    });
  }

  async update(actor: Actor, id: string, input: UpdatePostInput): Promise<PostWithTags> {
    const problems = new Problems();
    checkTitleAndBody(input, problems, false);
    const patch: Partial<PostRow> = {};
    if (typeof input.title === 'string') patch.title = input.title.trim();
    if (input.body !== undefined) patch.body = input.body;
    if (input.publishAt !== undefined) {
      const publishedAt = readDateTime(input.publishAt, 'publishAt', problems);
      if (publishedAt !== undefined) patch.published_at = publishedAt;
    }
    const tags = input.tags == null ? undefined : normaliseTags(input.tags, problems);
    problems.throwIfAny();

    return inTransaction(this.deps, async (tx) => {
      const current = await tx.db.selectFrom('posts').selectAll().where('id', '=', id).executeTakeFirst();
      if (!current) throw notFound('Post', id);
      assertMayChange(actor, current.author_id, 'post');
      const updated: PostRow = { ...current, ...patch, updated_at: iso(this.deps.clock.now()) };
      await tx.db
        .updateTable('posts')
        .set({ ...patch, updated_at: updated.updated_at })
        .where('id', '=', id)
        .execute();
      if (tags) await replacePostTags(tx.db, id, tags, updated.updated_at);
      const finalTags = tags
        ? [...tags].sort()
        : (
            await tx.db
              .selectFrom('post_tags')
              .select('tag_name')
              .where('post_id', '=', id)
              .orderBy('tag_name')
              .execute()
          ).map((r) => r.tag_name);
      tx.afterCommit({ kind: 'post.changed', postId: id });
      return { ...toPost(updated), tags: finalTags };
    });
  }

  /** Deletes the post with its comments and tag links. */
  async delete(actor: Actor, id: string): Promise<{ deletedPostId: string }> {
    return inTransaction(this.deps, async (tx) => {
      const current = await tx.db
        .selectFrom('posts')
        .select(['id', 'author_id'])
        .where('id', '=', id)
        .executeTakeFirst();
      if (!current) throw notFound('Post', id);
      assertMayChange(actor, current.author_id, 'post');
      await tx.db.deleteFrom('posts').where('id', '=', id).execute();
      tx.afterCommit({ kind: 'post.changed', postId: id });
      return { deletedPostId: id };
    });
  }

  async get(id: string): Promise<Post> {
    const row = await this.deps.store.db
      .selectFrom('posts')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Post', id);
    return toPost(row);
  }

  /** Batch read for data loaders; missing ids are absent from the map. */
  getMany(ids: readonly string[]): Promise<Map<string, Post>> {
    const db = this.deps.store.db;
    return byIds(
      ids,
      (unique) => db.selectFrom('posts').selectAll().where('id', 'in', unique).execute(),
      toPost,
    );
  }

  /** Tag names of many posts (batch); every asked id is in the map. */
  tagsFor(postIds: readonly string[]): Promise<Map<string, string[]>> {
    return this.tags.forPosts(postIds);
  }

  /** `Query.posts`: every post, newest first (id descending). */
  list(args: PageArgs = {}): Promise<Connection<Post>> {
    return paginate(
      this.deps.cursors,
      {
        scope: POSTS_SCOPE,
        order: 'desc',
        defaultSize: POSTS_PAGE_SIZE,
        fetch: (bounds, order, limit) => this.fetch(undefined, bounds, order, limit),
        count: () => this.count(undefined),
      },
      args,
      toPost,
    );
  }

  /** `User.posts`: one author's posts, newest first. */
  listByAuthor(authorId: string, args: PageArgs = {}): Promise<Connection<Post>> {
    return paginate(
      this.deps.cursors,
      {
        scope: authorScope(authorId),
        order: 'desc',
        defaultSize: POSTS_PAGE_SIZE,
        fetch: (bounds, order, limit) => this.fetch(authorId, bounds, order, limit),
        count: () => this.count(authorId),
      },
      args,
      toPost,
    );
  }

  /**
   * First pages of `User.posts` for many authors in two queries (a data loader's batch); the
   * cursors continue with `listByAuthor`.
   */
  async firstPagesByAuthors(
    authorIds: readonly string[],
    first?: number | null,
  ): Promise<Map<string, Connection<Post>>> {
    const size = checkFirst(first, POSTS_PAGE_SIZE);
    const ids = [...new Set(authorIds)];
    if (ids.length === 0) return new Map();
    const db = this.deps.store.db;
    const [rows, counts] = await Promise.all([
      db
        .selectFrom((eb) =>
          eb
            .selectFrom('posts')
            .selectAll()
            .select((e) =>
              e.fn
                .agg<number>('row_number', [])
                .over((ob) => ob.partitionBy('author_id').orderBy('id', 'desc'))
                .as('rn'),
            )
            .where('author_id', 'in', ids)
            .as('ranked'),
        )
        .selectAll()
        .where('rn', '<=', size + 1)
        .orderBy('author_id')
        .orderBy('id', 'desc')
        .execute(),
      this.countByAuthors(ids),
    ]);
    return firstPages(this.deps.cursors, ids, rows, (r) => r.author_id, counts, size, authorScope, toPost);
  }

  async countByAuthors(authorIds: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>(authorIds.map((id) => [id, 0]));
    if (authorIds.length === 0) return out;
    const rows = await this.deps.store.db
      .selectFrom('posts')
      .select((eb) => ['author_id', eb.fn.countAll<number>().as('n')])
      .where('author_id', 'in', [...new Set(authorIds)])
      .groupBy('author_id')
      .execute();
    for (const r of rows) out.set(r.author_id, Number(r.n));
    return out;
  }

  private fetch(authorId: string | undefined, bounds: KeyBound[], order: Order, limit: number) {
    let q = this.deps.store.db.selectFrom('posts').selectAll();
    if (authorId !== undefined) q = q.where('author_id', '=', authorId);
    for (const b of bounds) q = q.where('id', b.op, b.id);
    return q.orderBy('id', order).limit(limit).execute();
  }

  private async count(authorId: string | undefined): Promise<number> {
    let q = this.deps.store.db.selectFrom('posts').select((eb) => eb.fn.countAll<number>().as('n'));
    if (authorId !== undefined) q = q.where('author_id', '=', authorId);
    const row = await q.executeTakeFirstOrThrow();
    return Number(row.n);
  }
}

function checkTitleAndBody(
  input: { title?: unknown; body?: unknown },
  problems: Problems,
  required: boolean,
) {
  if (required || input.title !== undefined) checkContent(input.title, 'title', 200, problems);
  if (required || input.body !== undefined) checkContent(input.body, 'body', 50_000, problems);
}

export function toPost(row: PostRow): Post {
  return {
    id: row.id,
    authorId: row.author_id,
    title: row.title,
    body: row.body,
    publishedAt: row.published_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
