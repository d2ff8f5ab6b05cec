import { getIntrospectionQuery } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { codesOf, runOver, TRANSPORTS, type TransportName } from './transports.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * `__typename` aliases used to cost nothing: 6,600 of them at the root (118 KB, under the token
 * and body limits) blocked the event loop for over a second, and 2,000 under `posts(first: 100)`
 * cost 13 points and answered 2.9 MB. A document of more than 1,000 field selections is now refused
 * before graphql's validation rules run, and an aliased `__typename` costs a point like any field
 * (an unaliased one, as Apollo Client adds to every selection set, stays free).
 */
const typenames = (n: number, alias = (i: number) => `b${i}: `) =>
  Array.from({ length: n }, (_, i) => `${alias(i)}__typename`).join(' ');

describe('GraphQL document limits on every transport', () => {
  const server = listeningAtrium();
  let key: string;

  beforeAll(async () => {
    ({ key } = await authorWithPost(server.atrium, 'limitsauthor', 'Limits'));
  });

  it("refuses the tester's 6,600 root __typename aliases before validation, on POST, WS and SSE", async () => {
    // One selection names no field of Query: had graphql's validation rules run (the second of work
    // the limit exists to save), they would have answered "Cannot query field". Only the count answers.
    const query = `{ ${typenames(6599)} notAField }`;
    expect(query.length).toBeGreaterThan(100_000);
    for (const transport of ['POST', 'WS', 'SSE'] as const) {
      const a = await runOver(transport, server.base, { query });
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(a.errors).toHaveLength(1);
      expect(a.errors![0]!.message).toBe('The document selects 6600 fields; at most 1000 are allowed.');
      expect(a.errors![0]!.extensions).toMatchObject({ fields: 6600, maxFields: 1000 });
    }
  });

  describe.each(TRANSPORTS)('%s', (transport: TransportName) => {
    it('refuses 1,001 field selections (duplicates included), with the status the depth rule has', async () => {
      // Unaliased, so that GET's URL stays under Node's 16 KiB.
      const over = await runOver(transport, server.base, { query: `{ ${typenames(1001, () => '')} }` });
      expect(over.data).toBeUndefined();
      expect(codesOf(over)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(over.errors![0]!.message).toBe('The document selects 1001 fields; at most 1000 are allowed.');
      const deep = '{ posts { edges { node { author { posts { edges { node { author { id } } } } } } } } }';
      expect(over.status).toBe((await runOver(transport, server.base, { query: deep })).status);
    });

    it('runs 1,000 field selections (1,000 aliases at the root cost exactly 1,000 points)', async () => {
      if (transport === 'GET') return; // the document is over GET's 16 KiB URL
      const a = await runOver(transport, server.base, { query: `{ ${typenames(1000)} }` });
      expect(a.errors).toBeUndefined();
      expect(Object.keys(a.data as object)).toHaveLength(1000);
    });

    it('costs aliased __typename under a list like any field: 500 under posts is refused', async () => {
      const query = `{ posts(first: 100) { edges { node { ${typenames(500, (i) => `x${i}:`)} } } } }`;
      const a = await runOver(transport, server.base, { query }, { 'x-api-key': key });
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      // posts 1 + edges (1 + 10 × (node 1 + 500)).
      expect(a.errors![0]!.message).toBe('The query costs 5012 points; at most 1000 are allowed.');
    });

    it("runs Apollo Client's shape: an unaliased __typename in every selection set is free", async () => {
      const query = `{ __typename posts(first: 20) { __typename totalCount edges { __typename cursor
        node { __typename id title author { __typename handle }
          comments(first: 5) { __typename edges { __typename node { __typename id author { __typename handle } } } } } } } }`;
      const a = await runOver(transport, server.base, { query }, { 'x-api-key': key });
      expect(a.errors).toBeUndefined();
      expect((a.data as { posts: { totalCount: number } }).posts.totalCount).toBeGreaterThan(0);
    });
  });

  it("runs GraphiQL's introspection query outside production", async () => {
    const query = getIntrospectionQuery({
      descriptions: true,
      specifiedByUrl: true,
      directiveIsRepeatable: true,
      schemaDescription: true,
      inputValueDeprecation: true,
    });
    const a = await runOver('POST', server.base, { query });
    expect(a.errors).toBeUndefined();
    expect((a.data as { __schema: { types: unknown[] } }).__schema.types.length).toBeGreaterThan(10);
  });
});
