import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { print } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { root } from '../../helpers/cli.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * The README's path to production: the client's .graphql files through `npm run graphql:manifest`,
 * the manifest as PERSISTED_QUERIES_FILE, and Apollo Client sending hashes only, as docs/graphql.md
 * sets it up. Until 2026-11-28 the manifest held the operations as written, while Apollo Client
 * hashes them after adding `__typename` everywhere: production refused every Apollo operation.
 */

const OPERATIONS = `
query PostTitle($id: ID!) {
  post(id: $id) { id title author { ...Who } }
}
fragment Who on User { handle }
query PostCount { posts(first: 1) { totalCount } }
`;

const dir = mkdtempSync(join(tmpdir(), 'atrium-manifest-'));
mkdirSync(join(dir, 'ops'));
writeFileSync(join(dir, 'ops', 'posts.graphql'), OPERATIONS);
const manifestFile = join(dir, 'persisted-queries.json');
// As the README runs it: `npm run -s graphql:manifest -- <folder> > file`.
writeFileSync(
  manifestFile,
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/graphql-manifest.ts', join(dir, 'ops')], {
    cwd: root,
  }),
);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a manifest from npm run graphql:manifest, in production, with Apollo Client', () => {
  const server = listeningAtrium({ NODE_ENV: 'production', PERSISTED_QUERIES_FILE: manifestFile });

  interface Sent {
    method: string;
    hasQuery: boolean;
  }

  function apollo(headers: Record<string, string>) {
    const sent: Sent[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      const method = init?.method ?? 'GET';
      const hasQuery =
        method === 'GET'
          ? new URL(String(input)).searchParams.has('query')
          : JSON.parse(String(init?.body)).query !== undefined;
      sent.push({ method, hasQuery });
      return fetch(input, init);
    };
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new PersistedQueryLink({ sha256: sha256Hex, useGETForHashedQueries: true }).concat(
        new HttpLink({ uri: `${server.base}/graphql`, fetch: recordingFetch, headers }),
      ),
    });
    return { client, sent };
  }

  it('lists each operation as Apollo Client hashes it, and as written', () => {
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as {
      format: string;
      operations: Array<{ id: string; body: string; name: string }>;
    };
    expect(manifest.format).toBe('apollo-persisted-query-manifest');
    expect(manifest.operations.map((o) => o.name)).toEqual([
      'PostTitle',
      'PostTitle',
      'PostCount',
      'PostCount',
    ]);
    for (const o of manifest.operations) expect(o.id).toBe(sha256Hex(o.body));
    expect(manifest.operations[0]!.body).toContain('__typename');
    expect(manifest.operations[1]!.body).not.toContain('__typename');
  });

  it('runs what Apollo Client sends by hash alone (GET, no fallback to the query)', async () => {
    const author = await authorWithPost(server.atrium, 'manifest_author', 'Hashed');
    const { client, sent } = apollo(author.headers);
    const result = await client.query({
      query: gql`
        query PostTitle($id: ID!) {
          post(id: $id) {
            id
            title
            author {
              ...Who
            }
          }
        }
        fragment Who on User {
          handle
        }
      `,
      variables: { id: author.postId },
    });
    expect(result.error).toBeUndefined();
    expect(result.data).toEqual({
      post: {
        __typename: 'Post',
        id: author.postId,
        title: 'Hashed',
        author: { __typename: 'User', handle: 'manifest_author' },
      },
    });
    const count = await client.query({ query: gql(`query PostCount { posts(first: 1) { totalCount } }`) });
    expect(count.data).toMatchObject({ posts: { __typename: 'PostConnection' } });
    expect(sent).toEqual([
      { method: 'GET', hasQuery: false },
      { method: 'GET', hasQuery: false },
    ]);
  });

  it('runs the operation as written, by its hash, for clients that send documents unchanged', async () => {
    const written = print(gql(`query PostCount { posts(first: 1) { totalCount } }`));
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256Hex(written) } },
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ data: { posts: { totalCount: expect.any(Number) } } });
  });

  it('refuses an operation the manifest does not hold', async () => {
    const { client } = apollo({});
    // Apollo Client throws the server's error (its message; the code is PERSISTED_QUERY_NOT_FOUND).
    await expect(
      client.query({ query: gql(`query NotListed { posts(first: 2) { totalCount } }`) }),
    ).rejects.toThrow('PersistedQueryNotFound');
  });
});
