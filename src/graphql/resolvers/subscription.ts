import type { Comment } from '../../domain/comments.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError } from '../errors.js';
import { Undeliverable } from '../subscriptions/comment-feed.js';

/** `Subscription.commentAdded`: the stream comes from the instance's comment feed. */
export const subscriptionResolvers: Record<string, Record<string, unknown>> = {
  Subscription: {
    commentAdded: {
      subscribe: (_: unknown, args: { postId: string }, ctx: GraphQLContext) => {
        if (!ctx.commentFeed) {
          throw graphQLError(
            'BAD_USER_INPUT',
            'Subscriptions run over WebSocket (/graphql) or SSE (/graphql/stream).',
          );
        }
        return ctx.commentFeed.subscribe(args.postId, ctx.principal, ctx.recheck);
      },
      // An event answered with an error: the credentials stopped holding (the stream then ends), or
      // the database could not be reached (it stays open). The masking decides what is shown.
      resolve: (comment: Comment | Undeliverable) => {
        if (comment instanceof Undeliverable) throw comment.error;
        return comment;
      },
    },
  },
};
