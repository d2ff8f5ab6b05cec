/** The root types. Each area adds its fields with `extend type Query` in a file of its own. */
export const baseTypeDefs = /* GraphQL */ `
  "Read operations."
  type Query {
    "The caller's own user; requires credentials."
    me: User!
  }

  "Write operations."
  type Mutation {
    "Placeholder until the schema work lands; answers the caller's id."
    _noop: Boolean
  }

  "A user of Atrium."
  type User {
    "Opaque, prefixed, time-ordered identifier."
    id: ID!
    "Unique login handle."
    handle: String!
  }
`;
