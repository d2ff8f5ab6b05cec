import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

export interface GraphQLBody {
  data?: Record<string, unknown> | null;
  errors?: Array<{ message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }>;
}

export interface GraphQLServer {
  atrium: TestAtrium;
  url: string;
  /** POSTs an operation over a real socket with fetch, as any HTTP client would. */
  gql(
    query: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ): Promise<GraphQLBody & { status: number }>;
  stop(): Promise<void>;
}

/** A listening Atrium on a fresh database (port 0) and a client for its /graphql endpoint. */
export async function startGraphQLServer(env: Record<string, string> = {}): Promise<GraphQLServer> {
  const atrium = await startTestAtrium(env);
  const { httpUrl } = await atrium.listen();
  const url = `${httpUrl}/graphql`;
  return {
    atrium,
    url,
    async gql(query, variables, headers = {}) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
        body: JSON.stringify({ query, variables }),
      });
      return { status: res.status, ...((await res.json()) as GraphQLBody) };
    },
    stop: () => atrium.stop(),
  };
}

export const codes = (body: GraphQLBody) => (body.errors ?? []).map((e) => e.extensions?.code);
