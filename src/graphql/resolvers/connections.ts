import type { Connection } from '../../domain/connection.js';

/**
 * totalCount is read from the core only when the operation selects it: the connection counts on
 * that call, and a batch of first pages (Post.comments under many posts) counts all its parents in
 * one statement.
 */
const totalCount = (connection: Connection<unknown>) => connection.totalCount();

export const connectionResolvers = {
  PostConnection: { totalCount },
  CommentConnection: { totalCount },
  UserConnection: { totalCount },
  OrderConnection: { totalCount },
};
