import { beforeAll, describe, expect, it } from 'vitest';
import { codesOf, runOver, TRANSPORTS, type TransportName } from './transports.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * Every rule of the one pipeline, on every transport: POST, GET, graphql-ws and graphql-sse answer
 * the same codes for the same bad operation, and nothing executes when a rule refuses.
 */

/** Costs 232 points, 7 levels deep: posts → edges → node → comments → edges → node → id. */
const DEEP_LIST = 'posts(first: 1) { edges { node { comments(first: 1) { edges { node { id } } } } } }';
const aliased = (n: number) =>
  `query Heavy { ${Array.from({ length: n }, (_, i) => `a${i}: ${DEEP_LIST}`).join(' ')} }`;

describe('GraphQL pipeline rules on every transport', () => {
  const server = listeningAtrium();
  let key: string;
  let postId: string;

  beforeAll(async () => {
    ({ key, postId } = await authorWithPost(server.atrium, 'rulesauthor', 'Rules'));
  });

  describe.each(TRANSPORTS)('%s', (transport: TransportName) => {
    it('runs a valid operation', async () => {
      const a = await runOver(
        transport,
        server.base,
        { query: 'query One($id: ID!) { post(id: $id) { id title } }', variables: { id: postId } },
        { 'x-api-key': key },
      );
      expect(a.errors).toBeUndefined();
      expect(a.data).toEqual({ post: { id: postId, title: 'Rules' } });
    });

    it('refuses 8 levels of depth at validation', async () => {
      const a = await runOver(
        transport,
        server.base,
        {
          query: '{ posts { edges { node { author { posts { edges { node { author { id } } } } } } } } }',
        },
        { 'x-api-key': key },
      );
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(a.errors![0]!.message).toBe('The query nests 8 levels deep; at most 7 are allowed.');
    });

    it('refuses more than 1,000 points when aliases multiply a list', async () => {
      const a = await runOver(transport, server.base, { query: aliased(5) }, { 'x-api-key': key });
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(a.errors![0]!.message).toBe('The query costs 1160 points; at most 1000 are allowed.');
    });

    it('spends the per-user budget of 10,000 points, then answers RATE_LIMITED with retryAfter 60', async () => {
      const { key: own, userId } = await server.atrium.caller({ handle: `budget${transport.toLowerCase()}` });
      // 928 points each: ten fit in 10,000, the eleventh does not.
      for (let i = 0; i < 10; i++) {
        const ok = await runOver(transport, server.base, { query: aliased(4) }, { 'x-api-key': own });
        expect(ok.errors).toBeUndefined();
      }
      const refused = await runOver(transport, server.base, { query: aliased(4) }, { 'x-api-key': own });
      expect(refused.data).toBeUndefined();
      expect(codesOf(refused)).toEqual(['RATE_LIMITED']);
      expect(refused.errors![0]!.extensions!.retryAfter).toBe(60);
      // The same user's other credentials spend from the same budget: a second key, and a token.
      const second = await server.atrium.services.apiKeys.create({ userId, tier: 'enterprise' });
      const { token } = await server.atrium.services.oauth!.tokens.issue({
        subject: userId,
        clientId: `cli_budget${transport.toLowerCase()}`,
        scope: ['content:read'],
      });
      for (const headers of [{ 'x-api-key': second.key }, { authorization: `Bearer ${token}` }]) {
        const same = await runOver(transport, server.base, { query: aliased(4) }, headers);
        expect(codesOf(same)).toEqual(['RATE_LIMITED']);
      }
      // Another user's budget is untouched.
      const other = await runOver(transport, server.base, { query: aliased(4) }, { 'x-api-key': key });
      expect(other.errors).toBeUndefined();
    });

    it('refuses bad credentials', async () => {
      const a = await runOver(
        transport,
        server.base,
        { query: '{ me { id } }' },
        { 'x-api-key': 'atr_test_not_a_key' },
      );
      if (transport === 'WS') {
        expect(a.closeCode).toBe(4403);
      } else {
        expect(a.status).toBe(401);
        expect(codesOf(a)).toEqual(['UNAUTHENTICATED']);
      }
    });

    it('answers wrong variable types with a request error and runs nothing', async () => {
      const a = await runOver(transport, server.base, {
        query: 'query One($id: ID!) { post(id: $id) { id } }',
        variables: { id: { no: 1 } },
      });
      expect(a.data).toBeUndefined();
      expect(a.errors![0]!.message).toMatch(/Variable "\$id" got invalid value/);
    });

    it('answers an unknown operation name with an error', async () => {
      const a = await runOver(transport, server.base, {
        query: 'query A { __typename } query B { __typename }',
        operationName: 'C',
      });
      expect(a.data).toBeUndefined();
      expect(a.errors![0]!.message).toMatch(/^Could not determine what operation to execute/);
    });

    it('refuses a syntax error', async () => {
      const a = await runOver(transport, server.base, { query: '{ posts { ' });
      expect(a.data).toBeUndefined();
      expect(a.errors![0]!.message).toMatch(/^Syntax Error/);
    });

    it('refuses a document of too many tokens', async () => {
      const query = `{ ${Array.from({ length: 7000 }, (_, i) => `a${i}: __typename`).join(' ')} }`;
      const a = await runOver(transport, server.base, { query });
      if (transport === 'GET') {
        // A URL this long never reaches GraphQL: Node refuses headers over 16 KiB.
        expect(a.status).toBe(431);
        return;
      }
      expect(a.data).toBeUndefined();
      expect(a.errors![0]!.message).toMatch(/^Syntax Error: Document contains more that 20000 tokens/);
    });
  });
});
