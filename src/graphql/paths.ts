/** Where GraphQL listens: POST, GET, GraphiQL and graphql-ws on one path; graphql-sse beside it (decisions §3). */
export const GRAPHQL_PATH = '/graphql';
export const GRAPHQL_SSE_PATH = `${GRAPHQL_PATH}/stream`;
