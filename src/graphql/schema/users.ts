import { MAX_PAGE_SIZE } from '../../domain/connection.js';
import { MEMBERS_PAGE_SIZE, ORDERS_PAGE_SIZE } from '../../domain/connection-reads.js';
import { POSTS_PAGE_SIZE } from '../../domain/posts.js';
import { MAX_USERS_PAGE, USERS_PAGE_SIZE } from '../../domain/users.js';
import { count } from './describe.js';

/** Users, organizations and their queries and mutation. */
export const userTypeDefs = /* GraphQL */ `
  "A user's role."
  enum UserRole {
    "May do anything."
    ADMIN
    "Acts on their own records."
    MEMBER
    "Reads; may not write content."
    VIEWER
  }

  "A user of Atrium."
  type User implements Node & Auditable @key(fields: "id") {
    "Opaque, prefixed (usr_), time-ordered identifier."
    id: ID!
    "Unique login handle."
    handle: String!
    "The email address; visible only to the user themself or an admin. For anyone else it is an error (FORBIDDEN) that nulls the nearest nullable parent."
    email: String!
    "Given name."
    firstName: String
    "Family name."
    lastName: String
    "The user's posts, newest first (${POSTS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE})."
    posts(
      "Page size, 0 to ${MAX_PAGE_SIZE}; default ${POSTS_PAGE_SIZE}."
      first: Int
      "Cursor to continue after."
      after: String
    ): PostConnection!
    "When the user was created."
    createdAt: DateTime!
    "When the user last changed."
    updatedAt: DateTime!
    "The handle, under its old name."
    username: String! @deprecated(reason: "Use handle.")
    "First and last name joined by a space; null when neither is set."
    fullName: String @deprecated(reason: "Split into firstName and lastName.")
    "The user's role."
    role: UserRole!
    "The organization the user belongs to; readable by its members and admins (FORBIDDEN otherwise)."
    organization: Organization!
    "The user's orders, newest first; the user themself or an admin (FORBIDDEN otherwise)."
    orders(
      "Page size, 0 to ${MAX_PAGE_SIZE}; default ${ORDERS_PAGE_SIZE}."
      first: Int
      "Cursor to continue after."
      after: String
    ): OrderConnection!
  }

  "An organization users belong to."
  type Organization implements Node @key(fields: "id") {
    "Opaque, prefixed (org_) identifier."
    id: ID!
    "Display name."
    name: String!
    "When the organization was created."
    createdAt: DateTime!
    "Members by id ascending (${MEMBERS_PAGE_SIZE} by default, at most ${MAX_PAGE_SIZE})."
    members(
      "Page size, 0 to ${MAX_PAGE_SIZE}; default ${MEMBERS_PAGE_SIZE}."
      first: Int
      "Cursor to continue after."
      after: String
    ): UserConnection!
  }

  "A page of users."
  type UserConnection {
    "The users of this page."
    edges: [UserEdge!]!
    "Where this page sits."
    pageInfo: PageInfo!
    "Users in the whole list."
    totalCount: Int!
  }

  "A user in a page."
  type UserEdge {
    "The user."
    node: User!
    "Where to continue from."
    cursor: String!
  }

  "Changes to a user; every field optional. A user may change their own name and email; only an admin changes a role or another user."
  input UpdateUserInput {
    "Full name; split at the first space into firstName and lastName. Must not be blank."
    name: String
    "New email address."
    email: String
    "New role (admins only)."
    role: UserRole
  }

  extend type Query {
    "A user by id; null when there is none."
    user("The user's id." id: ID!): User
    "Users by id ascending, optionally of one role."
    users(
      "ADMIN, MEMBER or VIEWER (any case)."
      role: String
      "How many, 1 to ${count(MAX_USERS_PAGE)}; default ${USERS_PAGE_SIZE}."
      limit: Int
    ): [User!]!
  }

  extend type Mutation {
    "Changes a user (self-service for name and email; admins for roles and other users). Invalid input is BAD_USER_INPUT with details."
    updateUser("The user's id." id: ID!, "The changes." input: UpdateUserInput!): User!
  }
`;
