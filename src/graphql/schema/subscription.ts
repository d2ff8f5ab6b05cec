/** The live operations, served over graphql-ws at /graphql and graphql-sse at /graphql/stream. */
export const subscriptionTypeDefs = /* GraphQL */ `
  "Live operations: over WebSocket (graphql-ws, /graphql) or server-sent events (graphql-sse, /graphql/stream)."
  type Subscription {
    "Each comment added to the post from now on, once it is stored; only comments on posts the caller may see."
    commentAdded("The post to watch." postId: ID!): Comment!
  }
`;
