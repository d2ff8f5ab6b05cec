import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { ServicesOptions } from '../../../src/compose.js';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
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
export async function startGraphQLServer(
  env: Record<string, string> = {},
  options: ServicesOptions = {},
): Promise<GraphQLServer> {
  const atrium = await startTestAtrium(env, undefined, options);
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
export function graphQLServerForSuite(
  env: Record<string, string> = {},
  options: ServicesOptions = {},
): GraphQLServer {
  return forSuite(
    () => startGraphQLServer(env, options),
    (server) => server.stop(),
  );
}

export const codes = (body: GraphQLBody) => (body.errors ?? []).map((e) => e.extensions?.code);

/** A database outage as every transport must show it: no storage text, no HTTP instruction. */
export const noStorageText = (answer: unknown) =>
  expect(JSON.stringify(answer)).not.toMatch(
    /ECONNREFUSED|SQLITE|locked|127\.0\.0\.1|postgres|terminat|queryable|stack|originalError|"http"/i,
  );

/** The error a field (or a subscription's event) at `path` answers while the database is away. */
export const unavailableAt = (path: string[]) => ({
  message: STORE_UNAVAILABLE_MESSAGE,
  locations: expect.any(Array),
  path,
  extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 1 },
});

export interface ListeningAtrium {
  readonly atrium: TestAtrium;
  /** Base URL such as http://127.0.0.1:1234 (no path), as `runOver` takes it. */
  readonly base: string;
}

/** startTestAtrium, listening on a free port (stopped again if it cannot listen). */
async function startListening(
  env: Record<string, string>,
  options: ServicesOptions,
): Promise<ListeningAtrium> {
  const atrium = await startTestAtrium(env, undefined, options);
  try {
    return { atrium, base: (await atrium.listen()).httpUrl! };
  } catch (err) {
    await atrium.stop();
    throw err;
  }
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
    () => startListening(env, options),
    (s) => s.atrium.stop(),
  );
}

/**
 * A listening Atrium in production (NODE_ENV=production) for the enclosing describe block (see
 * forSuite), whose persisted-query manifest (PERSISTED_QUERIES_FILE) holds exactly `queries`, keyed
 * by their SHA-256: a temporary file written before the start and removed after the stop.
 */
export function productionAtrium(queries: readonly string[], options: ServicesOptions = {}): ListeningAtrium {
  return forSuite(
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'atrium-manifest-'));
      try {
        const file = join(dir, 'manifest.json');
        writeFileSync(file, JSON.stringify(Object.fromEntries(queries.map((q) => [sha256Hex(q), q]))));
        return {
          ...(await startListening({ NODE_ENV: 'production', PERSISTED_QUERIES_FILE: file }, options)),
          dir,
        };
      } catch (err) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    },
    async (s) => {
      await s.atrium.stop();
      rmSync(s.dir, { recursive: true, force: true });
    },
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
