import { executionAsyncResource } from 'node:async_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { listeningAtrium } from './support.js';
import { codesOf, runOver, type TransportName } from './transports.js';

// Long enough for a cold server on a loaded CI machine to answer the in-time cases (300 ms was not, at load 20).
const TIMEOUT_MS = 2_000;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const CREATE = `mutation($in: CreatePostInput!) { createPost(input: $in) {
  post { id title } errors { field message } } }`;

/** Whether AsyncLocalStorage is enabled: Node 20 then runs promise hooks on every promise. */
const promisesTracked = (): Promise<boolean> =>
  Promise.resolve().then(() => executionAsyncResource() instanceof Promise);

/**
 * Every GraphQL mutation has the request deadline (REQUEST_TIMEOUT_MS): past it, its transaction
 * rolls back and nothing of it is stored. Over POST the HTTP deadline answers 503; a mutation over
 * graphql-ws or graphql-sse has no HTTP request around it, so it gets the deadline itself and its
 * one result is SERVICE_UNAVAILABLE. Queries read outside the request scope.
 */
describe('GraphQL mutations have the request deadline on every transport', () => {
  const gate = new StatementGate();
  const log = memoryLog('warn');
  const server = listeningAtrium(
    { REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) },
    { storePlugins: [gate], logger: log.logger },
  );
  let author: Awaited<ReturnType<TestAtrium['caller']>>;

  const stored = async (title: string) => {
    const { db } = server.atrium.services.store;
    return (await db.selectFrom('posts').select('id').where('title', '=', title).execute()).length;
  };
  const create = (transport: TransportName, title: string) =>
    runOver(
      transport,
      server.base,
      { query: CREATE, variables: { in: { title, body: 'Body', authorId: author.userId } } },
      author.headers,
    );

  beforeAll(async () => {
    author = await server.atrium.caller({ role: 'member' });
  });

  /** POST straight to the direct path (`application/json`) or through Yoga (an Accept only it takes). */
  const post = async (accept: string, title: string) => {
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept, ...author.headers },
      body: JSON.stringify({
        query: CREATE,
        variables: { in: { title, body: 'Body', authorId: author.userId } },
      }),
    });
    return { status: res.status, body: (await res.json()) as { data?: unknown; errors?: unknown[] } };
  };
  const POSTS = [
    ['direct', 'application/json'],
    ['Yoga', 'application/json; charset=utf-8'],
  ] as const;

  // First: an abandoned request's scope never ends (its work may still run), so the storage stays on.
  it('queries run outside the request scope; a mutation is inside it until its answer is out', async () => {
    expect(await promisesTracked()).toBe(false);
    const read = await runOver('POST', server.base, { query: '{ me { handle } }' }, author.headers);
    expect(read.errors).toBeUndefined();
    expect(await promisesTracked()).toBe(false);
    for (const [path, accept] of POSTS) {
      const title = `Posted in time via ${path}`;
      const { status, body } = await post(accept, title);
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      expect(await stored(title)).toBe(1);
      expect(await promisesTracked()).toBe(false);
    }
  });

  for (const [path, accept] of POSTS) {
    it(`POST (${path}): a mutation held past the deadline answers 503 and is rolled back`, async () => {
      const title = `Too late via ${path}`;
      const held = gate.hold('InsertQueryNode', 'posts');
      const answer = post(accept, title);
      await held.reached;
      const { status, body } = await answer;
      const warned = log.lines.length;
      // The handler goes on once released: its next statement is refused and it rolls back. Were
      // it outside the scope, it would commit within a few ms of the release.
      held.release();
      await pause(300);
      expect(status).toBe(503);
      // GraphQL's error shape, as for every other refusal on /graphql; until 2026-11-28 REST's body
      // (`{ error: "service_unavailable", ... }`), which a GraphQL client cannot read.
      expect(body).toEqual({
        errors: [
          {
            message: 'The request took too long and was abandoned; try again.',
            extensions: { code: 'SERVICE_UNAVAILABLE' },
          },
        ],
      });
      expect(await stored(title)).toBe(0);
      // Its late answer is dropped quietly: no "Reply was already sent" warning with a stack.
      expect(log.lines.slice(warned).map((l) => l.msg)).toEqual([]);
    });
  }

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
