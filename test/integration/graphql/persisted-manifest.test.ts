import { execFileSync, spawnSync } from 'node:child_process';
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
 * Later the same day: a fragment from another file was left out, `@connection` (which Apollo Client
 * removes before hashing) kept, and only the file's order of operation and fragments listed, so
 * those operations were refused too (found by an outside walk).
 */

const FILES: Record<string, string> = {
  // A fragment other files spread, itself spreading another: cross-file and nested.
  'fragments/who.graphql': `
fragment Who on User { handle ...Names }
fragment Names on User { firstName lastName }
`,
  'posts.graphql': `
query PostTitle($id: ID!) {
  post(id: $id) { id title author { ...Who } }
}
query PostCount { posts(first: 1) { totalCount } }
`,
  // Nested in one file, defined in another order than spread.
  'team.graphql': `
query Team { me { ...Outer } }
fragment Inner on User { id }
fragment Outer on User { handle ...Inner }
`,
  // The fragment before the operation.
  'me.graphql': `
fragment MeBits on User { id role }
query Me { me { ...MeBits } }
`,
  'feed.graphql': `
query Feed { posts(first: 1) @connection(key: "feed") { edges { node { id title } } } }
`,
};

const dir = mkdtempSync(join(tmpdir(), 'atrium-manifest-'));
for (const [name, text] of Object.entries(FILES)) {
  mkdirSync(join(dir, 'ops', name, '..'), { recursive: true });
  writeFileSync(join(dir, 'ops', name), text);
}
const manifestFile = join(dir, 'persisted-queries.json');

/** `npm run -s graphql:manifest -- <paths>` as the README runs it. */
const runScript = (...paths: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'scripts/graphql-manifest.ts', ...paths], {
    cwd: root,
    encoding: 'utf8',
  });

writeFileSync(
  manifestFile,
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/graphql-manifest.ts', join(dir, 'ops')], {
    cwd: root,
  }),
);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The client's documents, written the usual Apollo way: each fragment interpolated after the
// document that spreads it.
const NAMES = gql`
  fragment Names on User {
    firstName
    lastName
  }
`;
const WHO = gql`
  fragment Who on User {
    handle
    ...Names
  }
  ${NAMES}
`;
const POST_TITLE = gql`
  query PostTitle($id: ID!) {
    post(id: $id) {
      id
      title
      author {
        ...Who
      }
    }
  }
  ${WHO}
`;
const INNER = gql`
  fragment Inner on User {
    id
  }
`;
const OUTER = gql`
  fragment Outer on User {
    handle
    ...Inner
  }
  ${INNER}
`;
const TEAM = gql`
  query Team {
    me {
      ...Outer
    }
  }
  ${OUTER}
`;
const ME_BITS = gql`
  fragment MeBits on User {
    id
    role
  }
`;
const ME = gql`
  query Me {
    me {
      ...MeBits
    }
  }
  ${ME_BITS}
`;
const FEED = gql`
  query Feed {
    posts(first: 1) @connection(key: "feed") {
      edges {
        node {
          id
          title
        }
      }
    }
  }
`;

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

  const manifest = () =>
    JSON.parse(readFileSync(manifestFile, 'utf8')) as {
      format: string;
      operations: Array<{ id: string; body: string; name: string; type: string }>;
    };

  it("lists each operation's forms, Apollo's generator's last", () => {
    const { format, operations } = manifest();
    expect(format).toBe('apollo-persisted-query-manifest');
    for (const o of operations) expect(o.id).toBe(sha256Hex(o.body));
    const last = new Map(operations.map((o) => [o.name, o.body]));
    expect([...last.keys()].sort()).toEqual(['Feed', 'Me', 'PostCount', 'PostTitle', 'Team']);
    // Byte for byte what @apollo/generate-persisted-query-manifest 1.4 writes with Apollo Client
    // 4.3: the operation, then its fragments by name, wherever they are defined.
    expect(last.get('PostTitle')).toBe(
      [
        'query PostTitle($id: ID!) {\n  post(id: $id) {\n    id\n    title\n    author {\n      ...Who\n      __typename\n    }\n    __typename\n  }\n}',
        'fragment Names on User {\n  firstName\n  lastName\n  __typename\n}',
        'fragment Who on User {\n  handle\n  ...Names\n  __typename\n}',
      ].join('\n\n'),
    );
    expect(last.get('Feed')).toBe(
      'query Feed {\n  posts(first: 1) {\n    edges {\n      node {\n        id\n        title\n        __typename\n      }\n      __typename\n    }\n    __typename\n  }\n}',
    );
    // @connection is Apollo Client's alone: no body keeps it (the server would refuse it).
    expect(operations.filter((o) => o.body.includes('@connection'))).toEqual([]);
  });

  it.each([
    ['a fragment from another file, spreading another', 'PostTitle'],
    ['nested fragments defined in another order than spread', 'Team'],
    ['a fragment defined before the operation', 'Me'],
    ['@connection, which Apollo Client removes', 'Feed'],
  ])('runs what Apollo Client sends by hash alone: %s (%s)', async (_, name) => {
    const handle = `manifest_${name.toLowerCase()}`;
    const author = await authorWithPost(server.atrium, handle, 'Hashed');
    const { client, sent } = apollo(author.headers);
    const query = { PostTitle: POST_TITLE, Team: TEAM, Me: ME, Feed: FEED }[name]!;
    const result = await client.query({ query, variables: { id: author.postId } });
    expect(result.error).toBeUndefined();
    expect(sent).toEqual([{ method: 'GET', hasQuery: false }]);
    const expected = {
      PostTitle: {
        post: {
          __typename: 'Post',
          id: author.postId,
          title: 'Hashed',
          author: { __typename: 'User', handle, firstName: 'Test', lastName: handle },
        },
      },
      Team: { me: { __typename: 'User', handle, id: author.userId } },
      Me: { me: { __typename: 'User', id: author.userId, role: 'MEMBER' } },
      Feed: { posts: { __typename: 'PostConnection', edges: [expect.anything()] } },
    }[name];
    expect(result.data).toEqual(expected);
  });

  it('runs the document as the file has it too (fragment first), and a plain operation', async () => {
    const author = await authorWithPost(server.atrium, 'manifest_file_order', 'Hashed');
    const { client, sent } = apollo(author.headers);
    const asFile = await client.query({ query: gql(FILES['me.graphql']!) });
    expect(asFile.data).toEqual({ me: { __typename: 'User', id: author.userId, role: 'MEMBER' } });
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

describe('npm run graphql:manifest refuses, in one line naming it', () => {
  const write = (name: string, text: string) => {
    const file = join(dir, 'bad', name);
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, text);
    return file;
  };

  it('a fragment no file given defines', () => {
    const file = write('missing.graphql', 'query Lost { me { ...Nowhere } }');
    const run = runScript(file);
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `graphql:manifest: query Lost (${file}) spreads fragment Nowhere, which no file given defines\n`,
    );
  });

  it('an operation or a fragment defined twice', () => {
    const a = write('twice/a.graphql', 'query Twice { me { id } }\nfragment Dup on User { id }');
    const b = write('twice/b.graphql', 'query Twice { me { handle } }');
    const c = write('twice/c.graphql', 'fragment Dup on User { handle }');
    expect(runScript(a, b)).toMatchObject({
      status: 1,
      stderr: `graphql:manifest: operation Twice is defined twice: in ${a} and in ${b}\n`,
    });
    expect(runScript(a, c)).toMatchObject({
      status: 1,
      stderr: `graphql:manifest: fragment Dup is defined twice: in ${a} and in ${c}\n`,
    });
  });

  it('an operation that does not validate against the schema', () => {
    const file = write('invalid.graphql', 'query Wrong { me { nope } }');
    const run = runScript(file);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(
      /^graphql:manifest: query Wrong \(.*invalid\.graphql\) does not validate against Atrium's schema: Cannot query field "nope" on type "User"\.[^\n]*\n$/,
    );
  });
});
