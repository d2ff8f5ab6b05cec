import type { Comment } from '../../domain/comments.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError } from '../errors.js';
import { CredentialsEnded } from '../subscriptions/comment-feed.js';

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
      // The stream's last event when the credentials stopped holding: the error, then the end.
      resolve: (comment: Comment | CredentialsEnded) => {
        if (comment instanceof CredentialsEnded) throw comment.error;
        return comment;
      },
    },
  },
};
