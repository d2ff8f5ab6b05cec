import { COMMENTS_PAGE_SIZE, MAX_COMMENT_LENGTH } from '../../domain/comments.js';
import { MAX_PAGE_SIZE } from '../../domain/connection.js';
import { MAX_BODY_LENGTH, MAX_TITLE_LENGTH, POSTS_PAGE_SIZE } from '../../domain/posts.js';
import { SEARCH_DEFAULT_LIMIT } from '../../domain/search.js';
import { MAX_TAG_LENGTH, MAX_TAGS_PER_POST } from '../../domain/tags.js';
import { count } from './describe.js';

/** Posts, comments, tags and search. */
export const contentTypeDefs = /* GraphQL */ `
  "A post. Drafts (no publishedAt) and scheduled posts are visible only to their author and admins."
  type Post implements Node & Auditable @key(fields: "id") {
    "Opaque, prefixed (pst_), time-ordered identifier."
    id: ID!
    "Title, 1 to ${MAX_TITLE_LENGTH} characters."
    title: String!
    "Body text."
    body: String!
    "Who wrote the post."
    author: User!
    "Comments, oldest first (${COMMENTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE})."
    comments(
      "Page size, 0 to ${MAX_PAGE_SIZE}; default ${COMMENTS_PAGE_SIZE}."
      first: Int
      "Cursor to continue after."
      after: String
      "Page size backward."
      last: Int
      "Cursor to continue before."
      before: String
    ): CommentConnection!
    "Tag names, alphabetical."
    tags: [String!]!
    "When the post is (or will be) published; null for a draft."
    publishedAt: DateTime
    "When the post was created."
    createdAt: DateTime!
    "When the post last changed."
    updatedAt: DateTime!
  }

  "A comment on a post."
  type Comment implements Node & Auditable @key(fields: "id") {
    "Opaque, prefixed (cmt_), time-ordered identifier."
    id: ID!
    "Comment text."
    body: String!
    "Who wrote the comment."
    author: User!
    "The post commented on."
    post: Post!
    "When the comment was created."
    createdAt: DateTime!
    "When the comment last changed."
    updatedAt: DateTime!
  }

  "A tag posts carry."
  type Tag {
    "Normalised name: trimmed, lower-case."
    name: String!
    "How many posts carry the tag."
    postCount: Int!
  }

  "A page of posts."
  type PostConnection {
    "The posts of this page."
    edges: [PostEdge!]!
    "Where this page sits."
    pageInfo: PageInfo!
    "Posts in the whole list (that the caller may see)."
    totalCount: Int!
  }

  "A post in a page."
  type PostEdge {
    "The post."
    node: Post!
    "Where to continue from."
    cursor: String!
  }

  "A page of comments."
  type CommentConnection {
    "The comments of this page."
    edges: [CommentEdge!]!
    "Where this page sits."
    pageInfo: PageInfo!
    "Comments in the whole list."
    totalCount: Int!
  }

  "A comment in a page."
  type CommentEdge {
    "The comment."
    node: Comment!
    "Where to continue from."
    cursor: String!
  }

  "What search finds."
  union SearchResult = User | Post | Comment

  "What the extended search finds: the SearchResult members plus tags."
  union ExtendedSearchResult = User | Post | Comment | Tag

  "A new post."
  input CreatePostInput {
    "Title, 1 to ${MAX_TITLE_LENGTH} characters, not blank."
    title: String!
    "Body, 1 to ${count(MAX_BODY_LENGTH)} characters, not blank."
    body: String!
    "The author: the caller, or anyone for an admin."
    authorId: ID!
    "Omitted: published now. null: a draft. A future time: scheduled."
    publishAt: DateTime
    "Up to ${MAX_TAGS_PER_POST} tags, each 1 to ${MAX_TAG_LENGTH} characters."
    tags: [String!]
  }

  "Changes to a post; every field optional."
  input UpdatePostInput {
    "New title."
    title: String
    "New body."
    body: String
    "Replaces the whole tag set."
    tags: [String!]
    "New publication time; null makes the post a draft."
    publishAt: DateTime
  }

  "A new comment."
  input AddCommentInput {
    "Comment text, 1 to ${count(MAX_COMMENT_LENGTH)} characters, not blank."
    body: String!
    "The author: the caller, or anyone for an admin."
    authorId: ID!
    "The post to comment on; it must be visible to the caller."
    postId: ID!
  }

  "The result of createPost."
  type CreatePostPayload {
    "The new post; null when errors is not empty."
    post: Post
    "Validation problems; empty on success."
    errors: [FieldError!]!
  }

  "The result of updatePost."
  type UpdatePostPayload {
    "The changed post; null when errors is not empty."
    post: Post
    "Validation problems; empty on success."
    errors: [FieldError!]!
  }

  "The result of deletePost."
  type DeletePostPayload {
    "The id of the deleted post; null when errors is not empty."
    deletedPostId: ID
    "Problems; empty on success."
    errors: [FieldError!]!
  }

  "The result of addComment."
  type AddCommentPayload {
    "The new comment; null when errors is not empty."
    comment: Comment
    "Validation problems; empty on success."
    errors: [FieldError!]!
  }

  extend type Query {
    "A post by id; null when there is none or the caller may not see it."
    post("The post's id." id: ID!): Post
    "Posts newest first (id descending): first/after forward, last/before backward; ${POSTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE}."
    posts(
      "Page size forward, 0 to ${MAX_PAGE_SIZE}."
      first: Int
      "Cursor to continue after."
      after: String
      "Page size backward, 0 to ${MAX_PAGE_SIZE}."
      last: Int
      "Cursor to continue before."
      before: String
    ): PostConnection!
    "Full-text search over users, posts and comments, most relevant first (at most ${SEARCH_DEFAULT_LIMIT})."
    search("Words to find; every word must match." query: String!): [SearchResult!]!
    "Search that also finds tags whose name is one of the query's words (tags first)."
    searchAll("Words to find; every word must match." query: String!): [ExtendedSearchResult!]!
  }

  extend type Mutation {
    "Changes a post (its author or an admin)."
    updatePost("The post's id." id: ID!, "The changes." input: UpdatePostInput!): UpdatePostPayload!
    "Deletes a post with its comments (its author or an admin)."
    deletePost("The post's id." id: ID!): DeletePostPayload!
    "Comments on a visible post; subscribers of commentAdded hear of it after it is stored."
    addComment("The new comment." input: AddCommentInput!): AddCommentPayload!
  }
`;
