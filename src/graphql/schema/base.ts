import { DATE_TIME_DESCRIPTION } from '../scalars.js';

/**
 * The federation link, the scalar and the shared abstractions. Each area adds its fields with
 * `extend type Query` / `extend type Mutation` in a file of its own.
 */
export const baseTypeDefs = /* GraphQL */ `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@shareable"])

  """${DATE_TIME_DESCRIPTION}"""
  scalar DateTime

  "Read operations."
  type Query {
    "The caller's own user; requires credentials (UNAUTHENTICATED otherwise)."
    me: User!
    "Any object that has a global id (users, organizations, posts, comments, orders); null when unknown or not visible to the caller."
    node("A global id, such as usr_..., pst_... or cmt_..." id: ID!): Node
  }

  "Write operations. Validation problems come back in each payload's errors list, never as GraphQL errors."
  type Mutation {
    "Creates a post as its author (or an admin for anyone)."
    createPost("The new post." input: CreatePostInput!): CreatePostPayload!
  }

  "An object with a global, opaque, prefixed and time-ordered id, unique across types."
  interface Node {
    "The global id."
    id: ID!
  }

  "An object that records when it was created and last changed."
  interface Auditable {
    "When the object was created."
    createdAt: DateTime!
    "When the object last changed."
    updatedAt: DateTime!
  }

  "Where a page of a connection sits in the whole list."
  type PageInfo @shareable {
    "True when more items exist beyond this page in the direction of paging forward."
    hasNextPage: Boolean!
    "True when items exist before this page."
    hasPreviousPage: Boolean!
    "The cursor of the first edge of the page; null for an empty page."
    startCursor: String
    "The cursor of the last edge of the page; null for an empty page."
    endCursor: String
  }

  "One problem with a mutation's input."
  type FieldError {
    "The input field at fault, as named in the input (e.g. authorId, publishAt, tags); null for the input as a whole."
    field: String
    "What is wrong, in words."
    message: String!
  }
`;
