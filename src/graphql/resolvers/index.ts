import { GraphQLError } from 'graphql';
import type { GraphQLContext } from '../context.js';

/** Resolver maps of every area, merged by type name in src/graphql/schema.ts. */
export const resolverMaps: Array<Record<string, Record<string, unknown>>> = [
  {
    Query: {
      me: async (_: unknown, __: unknown, ctx: GraphQLContext) => {
        if (!ctx.principal)
          throw new GraphQLError('Authentication required.', { extensions: { code: 'UNAUTHENTICATED' } });
        return ctx.services.core.users.get(ctx.principal.id);
      },
    },
  },
];
