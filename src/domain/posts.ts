import { byIds } from './batch.js';
import type { PostRow } from '../store/types.js';
import { POST_COLUMNS } from '../store/columns.js';
import type { Actor } from './actor.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import { inTransaction } from './context.js';
import { notFound, Problems } from './errors.js';
import { newId } from './ids.js';
import { ChildList } from './child-lists.js';
import { type Connection, type PageArgs, paginate } from './connection.js';
import {
  assertAuthorExists,
  assertMayChange,
  assertMayWriteAs,
  assertPostId,
  checkContent,
  checkId,
  readDateTime,
} from './posts-rules.js';
import { mayViewSeenPost, readPostForViewing, type SeenPost, visiblePostsSql } from './post-visibility.js';
import type { Viewer } from './user-policies.js';
import { normaliseTags, replacePostTags, type TagService } from './tags.js';

export const POSTS_PAGE_SIZE = 20;
export const MAX_TITLE_LENGTH = 200;
export const MAX_BODY_LENGTH = 50_000;

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
const postsByAuthor = new ChildList({
  table: 'posts',
  parent: 'author_id',
  order: 'desc',
  defaultSize: POSTS_PAGE_SIZE,
  scope: (authorId) => `posts:author:${authorId}`,
});

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
    assertPostId(id);

    return inTransaction(this.deps, async (tx) => {
      const seen = await readPostForViewing(tx.db, id);
      if (!seen || !mayViewSeenPost(actor, seen, this.deps.clock.now())) throw notFound('Post', id);
      const current = toRow(seen);
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
    assertPostId(id);
    return inTransaction(this.deps, async (tx) => {
      const seen = await readPostForViewing(tx.db, id);
      if (!seen || !mayViewSeenPost(actor, seen, this.deps.clock.now())) throw notFound('Post', id);
      const current = toRow(seen);
      assertMayChange(actor, current.author_id, 'post');
      await tx.db.deleteFrom('posts').where('id', '=', id).execute();
      tx.afterCommit({ kind: 'post.changed', postId: id });
      return { deletedPostId: id };
    });
  }

  /** One post as `viewer` sees it: a draft or scheduled post of someone else is not_found. */
  async get(viewer: Viewer, id: string): Promise<Post> {
    assertPostId(id);
    const seen = await readPostForViewing(this.deps.store.db, id);
    if (!seen || !mayViewSeenPost(viewer, seen, this.deps.clock.now())) throw notFound('Post', id);
    return toPost(toRow(seen));
  }

  /** Batch read for data loaders; missing and hidden ids are absent from the map. */
  getMany(viewer: Viewer, ids: readonly string[]): Promise<Map<string, Post>> {
    const db = this.deps.store.db;
    const visible = this.visible(viewer);
    return byIds(
      ids,
      'pst',
      (unique) => {
        return db.selectFrom('posts').select(POST_COLUMNS).where('id', 'in', unique).where(visible).execute();
      },
      toPost,
    );
  }

  /** Tag names of many posts (batch); every asked id is in the map. */
  tagsFor(postIds: readonly string[]): Promise<Map<string, string[]>> {
    return this.tags.forPosts(postIds);
  }

  /**
   * `Query.posts`: every post `viewer` may see, newest first (id descending), 20 by default;
   * `first`/`after` forward, `last`/`before` backward, sizes 0 to 100 (more: validation_error).
   */
  list(viewer: Viewer, args: PageArgs = {}): Promise<Connection<Post>> {
    const db = this.deps.store.db;
    const visible = this.visible(viewer);
    return paginate(
      this.deps.cursors,
      {
        scope: POSTS_SCOPE,
        order: 'desc',
        defaultSize: POSTS_PAGE_SIZE,
        fetch: (bounds, order, limit) => postsByAuthor.fetch(db, undefined, bounds, order, limit, visible),
        count: async () => {
          const row = await db
            .selectFrom('posts')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where(visible)
            .executeTakeFirstOrThrow();
          return Number(row.n);
        },
      },
      args,
      toPost,
    );
  }

  /** `User.posts`: one author's posts that `viewer` may see, newest first. */
  listByAuthor(viewer: Viewer, authorId: string, args: PageArgs = {}): Promise<Connection<Post>> {
    return postsByAuthor.page(
      this.deps.cursors,
      this.deps.store.db,
      authorId,
      args,
      toPost,
      this.visible(viewer),
    );
  }

  /**
   * First pages of `User.posts` for many authors in two queries (a data loader's batch); the
   * cursors continue with `listByAuthor`.
   */
  firstPagesByAuthors(
    viewer: Viewer,
    authorIds: readonly string[],
    first?: number | null,
  ): Promise<Map<string, Connection<Post>>> {
    return postsByAuthor.firstPages(
      this.deps.cursors,
      this.deps.store.db,
      authorIds,
      first,
      toPost,
      this.visible(viewer),
    );
  }

  /** Posts per author that `viewer` may see; every asked id is in the map. */
  countByAuthors(viewer: Viewer, authorIds: readonly string[]): Promise<Map<string, number>> {
    return postsByAuthor.countBy(this.deps.store.db, authorIds, this.visible(viewer));
  }

  private visible(viewer: Viewer) {
    return visiblePostsSql(viewer, this.deps.clock.now());
  }
}

function checkTitleAndBody(
  input: { title?: unknown; body?: unknown },
  problems: Problems,
  required: boolean,
) {
  if (required || input.title !== undefined) checkContent(input.title, 'title', MAX_TITLE_LENGTH, problems);
  if (required || input.body !== undefined) checkContent(input.body, 'body', MAX_BODY_LENGTH, problems);
}

const toRow = ({ authorDeleted: _, ...row }: SeenPost): PostRow => row;

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
