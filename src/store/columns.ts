import type { CommentsTable, PostsTable } from './types.js';

/**
 * The columns the code reads of posts and comments, named rather than `selectAll()`: on PostgreSQL
 * both tables also carry `search_vector` (migration 0009), a parsed copy of the text that only
 * search reads, and that every post or comment read would otherwise fetch and carry along.
 */
export const POST_COLUMNS = [
  'id',
  'author_id',
  'title',
  'body',
  'published_at',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof PostsTable)[];

export const COMMENT_COLUMNS = [
  'id',
  'post_id',
  'author_id',
  'body',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof CommentsTable)[];

// A column added to either table must be added here too, or reads would drop it.
type Unlisted =
  | Exclude<keyof PostsTable, (typeof POST_COLUMNS)[number]>
  | Exclude<keyof CommentsTable, (typeof COMMENT_COLUMNS)[number]>;
const everyColumnListed: [Unlisted] extends [never] ? true : never = true;
void everyColumnListed;

/** The same, qualified by table, for reads that join. */
export const QUALIFIED_POST_COLUMNS = POST_COLUMNS.map((c) => `posts.${c}` as const);
