import type { GraphQLContext } from '../context.js';
import { readableOrganization, resolveType, typeOfId } from './support.js';

/** `node(id)`, and the type resolution of the interfaces and unions, by the id's prefix. */
export const nodeResolvers = {
  Query: {
    node: async (_: unknown, args: { id: string }, ctx: GraphQLContext) => {
      switch (typeOfId(args.id)) {
        case 'User':
          return ctx.loaders.user.load(args.id);
        case 'Post':
          return ctx.loaders.post.load(args.id);
        case 'Comment':
          return ctx.loaders.comment.load(args.id);
        case 'Order':
          return ctx.loaders.order.load(args.id);
        case 'Organization':
          return readableOrganization(ctx, args.id);
        default:
          return null;
      }
    },
  },
  Node: { __resolveType: resolveType },
  Auditable: { __resolveType: resolveType },
  SearchResult: { __resolveType: resolveType },
  ExtendedSearchResult: { __resolveType: resolveType },
};
