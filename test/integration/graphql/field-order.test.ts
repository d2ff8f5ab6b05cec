import { describe, expect, it } from 'vitest';
import { authorWithPost, listeningAtrium } from './support.js';
import { wsClient } from './transports.js';

/**
 * GraphQL §7.2.2: a response map's keys are in the order of the selection set. Queries compiled by
 * graphql-jit kept it; what Yoga's executor ran (mutations, introspection, subscription events) put
 * fields that resolved at once before those that waited (until 2026-11-28).
 */
describe('response field order follows the selection set', () => {
  const server = listeningAtrium();

  /** The raw JSON text over fetch, so key order is what the server wrote. */
  async function postText(query: string, key: string): Promise<string> {
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-api-key': key },
      body: JSON.stringify({ query }),
    });
    expect(res.status).toBe(200);
    return res.text();
  }
  const keysOf = (text: string, ...path: string[]) => {
    let node = JSON.parse(text) as Record<string, unknown>;
    for (const p of ['data', ...path]) node = node[p] as Record<string, unknown>;
    return Object.keys(node);
  };

  it('a mutation payload over POST: comment, then errors, at every level', async () => {
    const { key, postId, userId } = await authorWithPost(server.atrium, 'order1', 'Ordered');
    const text = await postText(
      `mutation { addComment(input: { body: "hi", authorId: "${userId}", postId: "${postId}" }) { comment { post { id } id } errors { field } } }`,
      key,
    );
    expect(keysOf(text, 'addComment')).toEqual(['comment', 'errors']);
    expect(keysOf(text, 'addComment', 'comment')).toEqual(['post', 'id']);
  });

  it('a query with __type (graphql-js): fields in selection order at every level', async () => {
    const { key } = await server.atrium.caller({ handle: 'order2' });
    const text = await postText(
      '{ me { organization { name } id handle } __type(name: "User") { name } }',
      key,
    );
    expect(keysOf(text)).toEqual(['me', '__type']);
    expect(keysOf(text, 'me')).toEqual(['organization', 'id', 'handle']);
  });

  it('the same query compiled by graphql-jit answers in the same order', async () => {
    const { key } = await server.atrium.caller({ handle: 'order3' });
    const text = await postText('{ me { organization { name } id handle } }', key);
    expect(keysOf(text, 'me')).toEqual(['organization', 'id', 'handle']);
  });

  it('graphql-ws: a subscription event and a mutation keep the order too', async () => {
    const { key, postId, userId } = await authorWithPost(server.atrium, 'order4', 'Ordered');
    const client = wsClient(server.base, { 'x-api-key': key });
    try {
      const event = new Promise<Record<string, unknown>>((resolve, reject) => {
        client.subscribe(
          { query: `subscription { commentAdded(postId: "${postId}") { author { handle } id body } }` },
          {
            next: (v) => resolve(v.data?.commentAdded as Record<string, unknown>),
            error: reject,
            complete: () => undefined,
          },
        );
      });
      await new Promise((r) => setTimeout(r, 300));
      const added = await new Promise<Record<string, unknown>>((resolve, reject) => {
        client.subscribe(
          {
            query: `mutation { addComment(input: { body: "hi", authorId: "${userId}", postId: "${postId}" }) { comment { post { id } id } errors { field } } }`,
          },
          {
            next: (v) => resolve(v.data?.addComment as Record<string, unknown>),
            error: reject,
            complete: () => undefined,
          },
        );
      });
      expect(Object.keys(added)).toEqual(['comment', 'errors']);
      expect(Object.keys(added.comment as object)).toEqual(['post', 'id']);
      expect(Object.keys(await event)).toEqual(['author', 'id', 'body']);
    } finally {
      await client.dispose();
    }
  });
});
