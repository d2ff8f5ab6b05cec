import type { GraphQLScalarType } from 'graphql';
import { DateTimeScalar } from '../scalars.js';
import { connectionResolvers } from './connections.js';
import { contentResolvers } from './content.js';
import { nodeResolvers } from './node.js';
import { orderResolvers } from './orders.js';
import { userResolvers } from './users.js';
import { subscriptionResolvers } from './subscription.js';

type ResolverMap = Record<string, Record<string, unknown> | GraphQLScalarType>;

/** Resolver maps of every area, merged by type name in src/graphql/schema.ts. */
export const resolverMaps: ResolverMap[] = [
  { DateTime: DateTimeScalar },
  nodeResolvers,
  userResolvers,
  contentResolvers,
  orderResolvers,
  connectionResolvers,
  subscriptionResolvers,
];
