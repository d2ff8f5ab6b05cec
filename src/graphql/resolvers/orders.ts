import type { Order } from '../../domain/order-model.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError } from '../errors.js';

export const orderResolvers = {
  Order: {
    __resolveReference: (ref: { id: string }, ctx: GraphQLContext) => ctx.loaders.order.load(ref.id),
    userId: (order: Order) => order.ownerId,
    user: async (order: Order, _: unknown, ctx: GraphQLContext) => {
      const user = await ctx.loaders.user.load(order.ownerId);
      if (!user) throw graphQLError('NOT_FOUND', `User ${order.ownerId} not found.`);
      return user;
    },
    totalAmount: (order: Order) => order.amountCents / 100,
  },
};
