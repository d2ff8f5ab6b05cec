import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { type Answer, codesOf, runOver, TRANSPORTS } from './transports.js';

/**
 * One error shape whatever runs the operation and whatever carries it: a bad variable is refused
 * with the same words, `extensions.code` and HTTP status whether graphql-jit (queries) or Yoga's
 * executor (mutations, introspection, subscriptions) would have run it.
 */

const BAD = { a: 1 };
const OPERATIONS = {
  'query (graphql-jit)': 'query($id: ID!) { user(id: $id) { id } }',
  'mutation (graphql-js)': 'mutation($id: ID!) { deletePost(id: $id) { deletedPostId } }',
  'introspection (graphql-js)': 'query($id: String!) { __type(name: $id) { name } }',
};
const WORDS = 'Variable "$id" got invalid value { a: 1 }';

describe('a bad variable is refused alike on every execution path and transport', () => {
  let atrium: TestAtrium;
  let base: string;
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;

  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
    caller = await atrium.caller({ handle: 'errorshapes' });
  });
  afterAll(async () => atrium?.stop());

  describe.each(Object.entries(OPERATIONS))('%s', (_name, query) => {
    it.each(['application/graphql-response+json', 'application/json'])(
      'POST (accept %s): 400, no data, BAD_USER_INPUT',
      async (accept) => {
        const res = await fetch(`${base}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept, ...caller.headers },
          body: JSON.stringify({ query, variables: { id: BAD } }),
        });
        const body = (await res.json()) as Answer;
        expect(res.status).toBe(400);
        expect(body.data).toBeUndefined();
        expect(body.errors).toHaveLength(1);
        expect(body.errors![0]!.message).toContain(WORDS);
        expect(body.errors![0]!.extensions).toEqual({ code: 'BAD_USER_INPUT' });
      },
    );

    it.each(TRANSPORTS)('%s: no data, BAD_USER_INPUT in the same words', async (transport) => {
      if (transport === 'GET' && query.startsWith('mutation')) return; // GET runs no mutation (405)
      const a = await runOver(transport, base, { query, variables: { id: BAD } }, caller.headers);
      if (transport === 'POST' || transport === 'GET') expect(a.status).toBe(400);
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['BAD_USER_INPUT']);
      expect(a.errors![0]!.message).toContain(WORDS);
    });
  });

  it.each(['WS', 'SSE'] as const)(
    '%s: a subscription says it in the same words and code',
    async (transport) => {
      const query = 'subscription($id: ID!) { commentAdded(postId: $id) { id } }';
      const a = await runOver(transport, base, { query, variables: { id: BAD } }, caller.headers);
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['BAD_USER_INPUT']);
      expect(a.errors![0]!.message).toContain(WORDS);
    },
  );
});
