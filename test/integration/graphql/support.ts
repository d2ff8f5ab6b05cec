import type { ServicesOptions } from '../../../src/compose.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { forSuite } from '../../helpers/suite.js';

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

/** A GraphQL server (startGraphQLServer) for the enclosing describe block (see forSuite). */
export function graphQLServerForSuite(env: Record<string, string> = {}): GraphQLServer {
  return forSuite(
    () => startGraphQLServer(env),
    (server) => server.stop(),
  );
}

export const codes = (body: GraphQLBody) => (body.errors ?? []).map((e) => e.extensions?.code);

export interface ListeningAtrium {
  readonly atrium: TestAtrium;
  /** Base URL such as http://127.0.0.1:1234 (no path), as `runOver` takes it. */
  readonly base: string;
}

/**
 * A listening Atrium on a fresh database for the enclosing describe block (see forSuite): started
 * before its tests, stopped after them.
 */
export function listeningAtrium(
  env: Record<string, string> = {},
  options: ServicesOptions = {},
): ListeningAtrium {
  return forSuite(
    async () => {
      const atrium = await startTestAtrium(env, undefined, options);
      try {
        return { atrium, base: (await atrium.listen()).httpUrl! };
      } catch (err) {
        await atrium.stop();
        throw err;
      }
    },
    (s) => s.atrium.stop(),
  );
}

/** A new caller (user and API key) and one published post of theirs, titled `title`. */
export async function authorWithPost(
  atrium: TestAtrium,
  handle: string,
  title: string,
): Promise<Awaited<ReturnType<TestAtrium['caller']>> & { postId: string }> {
  const caller = await atrium.caller({ handle });
  const actor = { id: caller.userId, kind: 'user' as const, role: 'member' as const };
  const post = await atrium.services.core.posts.create(actor, { title, body: 'b', authorId: caller.userId });
  return { ...caller, postId: post.id };
}
