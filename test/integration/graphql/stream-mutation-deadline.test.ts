import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { codesOf, runOver, type TransportName } from './transports.js';

const TIMEOUT_MS = 300;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const CREATE = `mutation($in: CreatePostInput!) { createPost(input: $in) {
  post { id title } errors { field message } } }`;

/**
 * A mutation over graphql-ws or graphql-sse has no HTTP request around it, so it gets the request
 * deadline (REQUEST_TIMEOUT_MS) itself: past it, its transaction rolls back and the answer is
 * SERVICE_UNAVAILABLE, as HTTP answers 503; nothing of it is stored.
 */
describe('GraphQL mutations over the stream transports have the request deadline', () => {
  const gate = new StatementGate();
  let atrium: TestAtrium;
  let base: string;
  let author: Awaited<ReturnType<TestAtrium['caller']>>;

  const stored = async (title: string) =>
    (await atrium.services.store.db.selectFrom('posts').select('id').where('title', '=', title).execute())
      .length;
  const create = (transport: TransportName, title: string) =>
    runOver(
      transport,
      base,
      { query: CREATE, variables: { in: { title, body: 'Body', authorId: author.userId } } },
      author.headers,
    );

  beforeAll(async () => {
    atrium = await startTestAtrium({ REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) }, undefined, {
      storePlugins: [gate],
    });
    base = (await atrium.listen()).httpUrl!;
    author = await atrium.caller({ role: 'member' });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  for (const transport of ['WS', 'SSE'] as const) {
    it(`${transport}: a mutation held past the deadline inside its transaction is rolled back`, async () => {
      const title = `Too late over ${transport}`;
      // The INSERT has run and its transaction is open; the mutation waits here past its deadline.
      const held = gate.hold('InsertQueryNode', 'posts');
      const answer = create(transport, title);
      await held.reached;
      await pause(TIMEOUT_MS + 200);
      held.release();
      const result = await answer;
      expect(codesOf(result)).toEqual(['SERVICE_UNAVAILABLE']);
      expect(await stored(title)).toBe(0);
    });

    it(`${transport}: a mutation within the deadline commits`, async () => {
      const title = `In time over ${transport}`;
      const result = await create(transport, title);
      expect(result.errors).toBeUndefined();
      expect(result.data).toMatchObject({ createPost: { post: { title }, errors: [] } });
      expect(await stored(title)).toBe(1);
    });
  }
});
