import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { codesOf, runOver, TRANSPORTS } from './transports.js';
import { listeningAtrium } from './support.js';

const persisted = (query: string) => ({ persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } });

describe('persisted queries in development: registration by hash, stored for every instance', () => {
  const server = listeningAtrium();

  it('answers PERSISTED_QUERY_NOT_FOUND for an unknown hash, then registers hash + query and runs it by hash alone', async () => {
    const query = '{ __typename registered: __typename }';
    const first = await runOver('GET', server.base, { extensions: persisted(query) });
    expect(first.status).toBe(200);
    expect(codesOf(first)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    const register = await runOver('POST', server.base, { query, extensions: persisted(query) });
    expect(register.data).toEqual({ __typename: 'Query', registered: 'Query' });
    const row = await server.atrium.services.store.db
      .selectFrom('persisted_queries')
      .selectAll()
      .where('hash', '=', sha256Hex(query))
      .executeTakeFirst();
    expect(row?.query).toBe(query);
    for (const transport of TRANSPORTS) {
      const a = await runOver(transport, server.base, { extensions: persisted(query) });
      expect(a.data, transport).toEqual({ __typename: 'Query', registered: 'Query' });
    }
  });

  it('refuses a hash that is not the SHA-256 of the query sent with it, and stores nothing', async () => {
    const a = await runOver('POST', server.base, {
      query: '{ __typename }',
      extensions: { persistedQuery: { version: 1, sha256Hash: sha256Hex('{ other }') } },
    });
    expect(a.status).toBe(400);
    expect(codesOf(a)).toEqual(['BAD_REQUEST']);
    const row = await server.atrium.services.store.db
      .selectFrom('persisted_queries')
      .select('hash')
      .where('hash', '=', sha256Hex('{ other }'))
      .executeTakeFirst();
    expect(row).toBeUndefined();
  });

  it('refuses a mutation by GET with 405, even through a persisted hash', async () => {
    const mutation = 'mutation { deletePost(id: "pst_none") { deletedPostId } }';
    await runOver('POST', server.base, {
      query: 'query { __typename }',
      extensions: persisted('query { __typename }'),
    });
    const plain = await runOver('GET', server.base, { query: mutation });
    expect(plain.status).toBe(405);
    // Register the mutation's hash by POST (it runs and fails on auth), then try it by GET.
    await runOver('POST', server.base, { query: mutation, extensions: persisted(mutation) });
    const hashed = await runOver('GET', server.base, { extensions: persisted(mutation) });
    expect(hashed.status).toBe(405);
  });

  it('works with Apollo Client: hash first, the query on a miss, GET for hashed queries', async () => {
    const seen: Array<{ method: string; hasQuery: boolean }> = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      const url = new URL(String(input));
      const method = init?.method ?? 'GET';
      const hasQuery =
        method === 'GET' ? url.searchParams.has('query') : JSON.parse(String(init?.body)).query !== undefined;
      seen.push({ method, hasQuery });
      return fetch(input, init);
    };
    const makeClient = () =>
      new ApolloClient({
        cache: new InMemoryCache(),
        link: new PersistedQueryLink({ sha256: sha256Hex, useGETForHashedQueries: true }).concat(
          new HttpLink({ uri: `${server.base}/graphql`, fetch: recordingFetch }),
        ),
      });
    const query = gql`
      query ApolloProbe {
        posts(first: 1) {
          totalCount
        }
      }
    `;
    const first = await makeClient().query({ query });
    expect(first.data).toEqual({ posts: { __typename: 'PostConnection', totalCount: 0 } });
    expect(seen).toEqual([
      { method: 'GET', hasQuery: false },
      { method: 'POST', hasQuery: true },
    ]);
    seen.length = 0;
    const again = await makeClient().query({ query });
    expect(again.data).toEqual(first.data);
    expect(seen).toEqual([{ method: 'GET', hasQuery: false }]);
  });
});

describe('persisted queries in production: only known hashes run, on every transport', () => {
  let atrium: TestAtrium;
  let base: string;
  let dir: string;
  const fromPlainMap = '{ plain: __typename }';
  const fromApolloManifest = 'query ManifestOp { manifest: __typename }';
  const introspection = '{ __schema { queryType { name } } }';
  const storedEarlier = '{ stored: __typename }';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-pq-'));
    const plainFile = join(dir, 'plain.json');
    writeFileSync(
      plainFile,
      JSON.stringify({ [sha256Hex(fromPlainMap)]: fromPlainMap, [sha256Hex(introspection)]: introspection }),
    );
    const apolloFile = join(dir, 'apollo.json');
    writeFileSync(
      apolloFile,
      JSON.stringify({
        format: 'apollo-persisted-query-manifest',
        version: 1,
        operations: [
          { id: sha256Hex(fromApolloManifest), body: fromApolloManifest, name: 'ManifestOp', type: 'query' },
        ],
      }),
    );
    // Two formats are checked with two servers on one database? One file per start: the plain map
    // here, the Apollo manifest through parseManifest below and a second start.
    atrium = await startTestAtrium({ NODE_ENV: 'production', PERSISTED_QUERIES_FILE: plainFile });
    await atrium.services.store.db
      .insertInto('persisted_queries')
      .values({ hash: sha256Hex(storedEarlier), query: storedEarlier, created_at: new Date().toISOString() })
      .execute();
    base = (await atrium.listen()).httpUrl!;
  });
  afterAll(async () => {
    await atrium?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(TRANSPORTS)('%s: runs a manifest hash and a hash stored earlier', async (transport) => {
    expect((await runOver(transport, base, { extensions: persisted(fromPlainMap) })).data).toEqual({
      plain: 'Query',
    });
    expect((await runOver(transport, base, { extensions: persisted(storedEarlier) })).data).toEqual({
      stored: 'Query',
    });
  });

  it.each(TRANSPORTS)('%s: refuses a plain document with PERSISTED_QUERY_REQUIRED', async (transport) => {
    const a = await runOver(transport, base, { query: '{ __typename }' });
    expect(a.data).toBeUndefined();
    expect(codesOf(a)).toEqual(['PERSISTED_QUERY_REQUIRED']);
  });

  it.each(TRANSPORTS)(
    '%s: refuses an unknown hash, with or without its query (no registration)',
    async (transport) => {
      const fresh = `{ fresh${transport}: __typename }`;
      const a = await runOver(transport, base, { query: fresh, extensions: persisted(fresh) });
      expect(codesOf(a)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
      const b = await runOver(transport, base, { extensions: persisted(fresh) });
      expect(codesOf(b)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
      const row = await atrium.services.store.db
        .selectFrom('persisted_queries')
        .select('hash')
        .where('hash', '=', sha256Hex(fresh))
        .executeTakeFirst();
      expect(row).toBeUndefined();
    },
  );

  it.each(TRANSPORTS)('%s: refuses introspection even through a known hash', async (transport) => {
    const a = await runOver(transport, base, { extensions: persisted(introspection) });
    expect(a.data).toBeUndefined();
    expect(a.errors![0]!.message).toMatch(/introspection/i);
  });

  it('reads an Apollo persisted-query manifest too', async () => {
    const second = await startTestAtrium({
      NODE_ENV: 'production',
      PERSISTED_QUERIES_FILE: join(dir, 'apollo.json'),
    });
    try {
      const url = (await second.listen()).httpUrl!;
      const a = await runOver('POST', url, {
        extensions: persisted(fromApolloManifest),
        operationName: 'ManifestOp',
      });
      expect(a.data).toEqual({ manifest: 'Query' });
    } finally {
      await second.stop();
    }
  });

  it('refuses to start with a manifest whose hash does not match its query', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ [sha256Hex('{ a }')]: '{ b }' }));
    await expect(startTestAtrium({ NODE_ENV: 'production', PERSISTED_QUERIES_FILE: bad })).rejects.toThrow(
      /is not the SHA-256 of its query/,
    );
  });

  it('refuses to start with a manifest entry that does not validate against the schema', async () => {
    // What the manifest script wrote before 2026-11-28 for an operation spreading a fragment from
    // another file, and for one with Apollo Client's @connection: production started, then answered
    // those operations with validation errors (or never saw their real hash).
    const cases = [
      [
        'query MeCross { me { ...UserBits __typename } }',
        /operation MeCross \([0-9a-f]{64}\) does not validate against the schema: Unknown fragment "UserBits"\./,
      ],
      [
        'query Feed { posts(first: 1) @connection(key: "feed") { totalCount } }',
        /operation Feed \([0-9a-f]{64}\) does not validate against the schema: Unknown directive "@connection"\./,
      ],
      ['{ me { id', /[0-9a-f]{64} does not parse: Syntax Error/],
    ] as const;
    for (const [body, problem] of cases) {
      const file = join(dir, 'invalid.json');
      writeFileSync(
        file,
        JSON.stringify({
          format: 'apollo-persisted-query-manifest',
          version: 1,
          operations: [
            {
              id: sha256Hex(fromApolloManifest),
              body: fromApolloManifest,
              name: 'ManifestOp',
              type: 'query',
            },
            { id: sha256Hex(body), body, name: 'Broken', type: 'query' },
          ],
        }),
      );
      const start = startTestAtrium({ NODE_ENV: 'production', PERSISTED_QUERIES_FILE: file });
      await expect(start, body).rejects.toThrow(problem);
      await expect(start, body).rejects.toMatchObject({
        name: 'ConfigError',
        variable: 'PERSISTED_QUERIES_FILE',
      });
    }
  });
});
