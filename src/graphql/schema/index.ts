import { baseTypeDefs } from './base.js';
import { contentTypeDefs } from './content.js';
import { orderTypeDefs } from './orders.js';
import { subscriptionTypeDefs } from './subscription.js';
import { userTypeDefs } from './users.js';

/**
 * Every SDL fragment of the schema, concatenated in this order. SDL lives in TypeScript strings so
 * the compiled build needs no asset copying; each area keeps its own file.
 */
export const typeDefs: string[] = [
  baseTypeDefs,
  userTypeDefs,
  contentTypeDefs,
  orderTypeDefs,
  subscriptionTypeDefs,
];
