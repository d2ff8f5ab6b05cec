import type { Comment } from '../../domain/comments.js';
import type { PageArgs } from '../../domain/connection.js';
import type { Post } from '../../domain/posts.js';
import type { SearchHit } from '../../domain/search.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError, toGraphQLError, viaCore } from '../errors.js';
import { actorOf, payload, viewerOf } from './support.js';

interface PostInput {
  title?: string;
  body?: string;
  authorId?: string;
  publishAt?: Date | null;
  tags?: string[] | null;
}

/** A hit of the core's search as the object it names, through the loaders (null when gone). */
function loadHit(ctx: GraphQLContext, hit: SearchHit) {
  if (hit.kind === 'user') return ctx.loaders.user.load(hit.id);
  if (hit.kind === 'post') return ctx.loaders.post.load(hit.id);
  return ctx.loaders.comment.load(hit.id);
}

async function searchObjects(ctx: GraphQLContext, query: string) {
  const hits = await viaCore(() =>
    ctx.services.core.search.search(
      viewerOf(ctx),
      query,
      undefined,
      ctx.principal?.scopes ?? null,
      ctx.signal,
    ),
  );
  const objects = await Promise.all(hits.map((hit) => loadHit(ctx, hit)));
  return objects.filter((o) => o !== null);
}

/** Non-null links (a post's author, a comment's post) that are missing are an error at that path. */
function present<T>(value: T | null, what: string, id: string): T {
  if (value === null) throw graphQLError('NOT_FOUND', `${what} ${id} not found.`);
  return value;
}

const rethrowMapped = (err: unknown): never => {
  throw toGraphQLError(err);
};

/**
 * `present(await load())` with core errors mapped, as one promise chain. An async resolver costs
 * more promises than its `await` shows (its own result, and a throwaway per await while async hooks
 * are on, as the request scope keeps them), and these resolvers run once per row: issue 7's query
 * calls them 120 times.
 */
function loadPresent<T>(load: () => Promise<T | null>, what: string, id: string): Promise<T> {
  try {
    return load().then((value) => present(value, what, id), rethrowMapped);
  } catch (err) {
    return Promise.reject(toGraphQLError(err) as Error);
  }
}

export const contentResolvers = {
  Query: {
    post: (_: unknown, args: { id: string }, ctx: GraphQLContext) => ctx.loaders.post.load(args.id),
    posts: (_: unknown, args: PageArgs, ctx: GraphQLContext) =>
      viaCore(() => ctx.services.core.posts.list(viewerOf(ctx), args)),
    search: (_: unknown, args: { query: string }, ctx: GraphQLContext) => searchObjects(ctx, args.query),
    searchAll: async (_: unknown, args: { query: string }, ctx: GraphQLContext) => {
      const [tags, objects] = await Promise.all([
        viaCore(() => ctx.services.core.tags.matching(viewerOf(ctx), args.query)),
        searchObjects(ctx, args.query),
      ]);
      return [...tags.values(), ...objects];
    },
  },
  Mutation: {
    createPost: (_: unknown, args: { input: PostInput }, ctx: GraphQLContext) => {
      const actor = actorOf(ctx);
      return payload('post', () =>
        ctx.services.core.posts.create(
          actor,
          args.input as Required<Pick<PostInput, 'title' | 'body' | 'authorId'>> & PostInput,
        ),
      );
    },
    updatePost: (_: unknown, args: { id: string; input: PostInput }, ctx: GraphQLContext) => {
      const actor = actorOf(ctx);
      return payload('post', () => ctx.services.core.posts.update(actor, args.id, args.input));
    },
    deletePost: async (_: unknown, args: { id: string }, ctx: GraphQLContext) => {
      const actor = actorOf(ctx);
      const result = await payload('deleted', () => ctx.services.core.posts.delete(actor, args.id));
      return { deletedPostId: result.deleted?.deletedPostId ?? null, errors: result.errors };
    },
    addComment: (
      _: unknown,
      args: { input: { body: string; authorId: string; postId: string } },
      ctx: GraphQLContext,
    ) => {
      const actor = actorOf(ctx);
      return payload('comment', () => ctx.services.core.comments.add(actor, args.input));
    },
  },
  Post: {
    __resolveReference: (ref: { id: string }, ctx: GraphQLContext) => ctx.loaders.post.load(ref.id),
    author: (post: Post, _: unknown, ctx: GraphQLContext) =>
      loadPresent(() => ctx.loaders.user.load(post.authorId), 'User', post.authorId),
    tags: (post: Post & { tags?: string[] }, _: unknown, ctx: GraphQLContext) =>
      post.tags ?? ctx.loaders.postTags.load(post.id),
    comments: (post: Post, args: PageArgs, ctx: GraphQLContext) =>
      args.after == null && args.last == null && args.before == null
        ? loadPresent(() => ctx.loaders.commentPages.load(post.id, args.first), 'Post', post.id)
        : viaCore(() => ctx.services.core.comments.listByPost(viewerOf(ctx), post.id, args)),
  },
  Comment: {
    __resolveReference: (ref: { id: string }, ctx: GraphQLContext) => ctx.loaders.comment.load(ref.id),
    author: (comment: Comment, _: unknown, ctx: GraphQLContext) =>
      loadPresent(() => ctx.loaders.user.load(comment.authorId), 'User', comment.authorId),
    post: (comment: Comment, _: unknown, ctx: GraphQLContext) =>
      loadPresent(() => ctx.loaders.post.load(comment.postId), 'Post', comment.postId),
  },
};
