import { createClient as createSseClient } from 'graphql-sse';
import { describe, expect, it } from 'vitest';
import type { TestAtrium } from '../../helpers/atrium.js';
import { until } from '../../helpers/wait.js';
import { listeningAtrium } from './support.js';
import { wsClient } from './transports.js';

/**
 * Each `commentAdded` event is its own execution, with DataLoaders of its own: what an earlier event
 * loaded (the comment's author, its post, the post's author) is read again for the next one, so a
 * long-lived subscriber sees a renamed user or a retitled post as it is now, a user deleted since is
 * gone, and the loaders do not grow with every author and post the subscription ever met. Until
 * 2026-11-28 the loaders were made once per subscription and served the first value for its life.
 */

const SELECTION = 'id author { id handle firstName } post { id title author { id handle } }';
const SUBSCRIPTION = `subscription Watch($postId: ID!) { commentAdded(postId: $postId) { ${SELECTION} } }`;

interface Event {
  data?: { commentAdded: unknown } | null;
  errors?: Array<{ message: string; path?: unknown[]; extensions?: Record<string, unknown> }>;
}

/** A subscription over graphql-ws or graphql-sse, keeping every result it is sent. */
function subscribe(transport: 'WS' | 'SSE', base: string, postId: string, key: string) {
  const events: Event[] = [];
  const failures: unknown[] = [];
  const sink = {
    next: (value: Event) => events.push(value),
    error: (err: unknown) => failures.push(err),
    complete: () => undefined,
  };
  const payload = { query: SUBSCRIPTION, variables: { postId } };
  let stop: () => Promise<void>;
  if (transport === 'WS') {
    const client = wsClient(base, { 'x-api-key': key });
    const off = client.subscribe(payload, sink as never);
    stop = async () => {
      off();
      await client.dispose();
    };
  } else {
    const client = createSseClient({
      url: `${base}/graphql/stream`,
      headers: { 'x-api-key': key },
      retryAttempts: 0,
    });
    const off = client.subscribe(payload, sink as never);
    stop = async () => {
      off();
      client.dispose();
    };
  }
  return {
    events,
    failures,
    /** The `n`th result (from 1), once it has arrived. */
    async event(n: number): Promise<Event> {
      await until(() => events.length >= n || failures.length > 0, `event ${n} over ${transport}`);
      expect(failures).toEqual([]);
      return events[n - 1]!;
    },
    stop: () => stop(),
  };
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until the subscription delivers (a comment added every 250 ms until one arrives), and a
 * little longer for the last of those: answers how many events there were by then.
 */
async function inPlace(
  sub: ReturnType<typeof subscribe>,
  comment: (body: string) => Promise<unknown>,
  transport: string,
): Promise<number> {
  await until(async () => {
    await comment('ready?');
    await settle(250);
    expect(sub.failures).toEqual([]);
    return sub.events.length > 0;
  }, `the subscription over ${transport} in place`);
  await settle(300);
  return sub.events.length;
}

const member = (id: string) => ({ id, kind: 'user' as const, role: 'member' as const });

/** What a query (a fresh operation) answers for the comment, as `commentAdded` would show it. */
async function queried(base: string, key: string, commentId: string): Promise<Event> {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-api-key': key },
    body: JSON.stringify({
      query: `query One($id: ID!) { node(id: $id) { ... on Comment { ${SELECTION} } } }`,
      variables: { id: commentId },
    }),
  });
  const body = (await res.json()) as { data?: { node: unknown } | null; errors?: Event['errors'] };
  return {
    ...(body.data !== undefined ? { data: body.data && { commentAdded: body.data.node } } : {}),
    ...(body.errors
      ? {
          errors: body.errors.map((e) => ({
            ...e,
            path: e.path?.map((p) => (p === 'node' ? 'commentAdded' : p)),
          })),
        }
      : {}),
  };
}

describe('commentAdded: every event is read with fresh loaders', () => {
  const server = listeningAtrium();

  /** A post by `owner`, a commenter, a subscriber watching the post (not the owner, not the commenter). */
  let scenes = 0;
  async function scene(atrium: TestAtrium) {
    scenes += 1;
    const owner = {
      handle: `loaderowner${scenes}`,
      ...(await atrium.caller({ handle: `loaderowner${scenes}` })),
    };
    const commenter = {
      handle: `loadercommenter${scenes}`,
      ...(await atrium.caller({ handle: `loadercommenter${scenes}` })),
    };
    const subscriber = await atrium.caller();
    await atrium.services.core.users.update(member(commenter.userId), commenter.userId, {
      firstName: 'First',
    });
    const post = await atrium.services.core.posts.create(member(owner.userId), {
      title: 'First title',
      body: 'b',
      authorId: owner.userId,
    });
    const comment = (body: string) =>
      atrium.services.core.comments.add(member(commenter.userId), {
        body,
        authorId: commenter.userId,
        postId: post.id,
      });
    return { owner, commenter, subscriber, post, comment };
  }

  describe.each(['WS', 'SSE'] as const)('%s', (transport) => {
    it('shows the author renamed and the post retitled since an earlier event', async () => {
      const { atrium } = server;
      const { owner, commenter, subscriber, post, comment } = await scene(atrium);
      const sub = subscribe(transport, server.base, post.id, subscriber.key);
      try {
        // The subscription is in place once a comment added now is delivered.
        const seen = await inPlace(sub, comment, transport);
        /** The event for comment `id` with the commenter's first name and the post's title as given. */
        const shown = (id: string, firstName: string, title: string) => ({
          data: {
            commentAdded: {
              id,
              author: { id: commenter.userId, handle: commenter.handle, firstName },
              post: { id: post.id, title, author: { id: owner.userId, handle: owner.handle } },
            },
          },
        });
        const first = await comment('one');
        expect(await sub.event(seen + 1)).toEqual(shown(first.id, 'First', 'First title'));

        // Through the core, as any REST, GraphQL or gRPC caller would.
        await atrium.services.core.users.update(member(commenter.userId), commenter.userId, {
          firstName: 'Renamed',
        });
        await atrium.services.core.posts.update(member(owner.userId), post.id, { title: 'Second title' });
        const second = await comment('two');
        const event = await sub.event(seen + 2);
        expect(event).toEqual(shown(second.id, 'Renamed', 'Second title'));
        expect(event).toEqual(await queried(server.base, subscriber.key, second.id));
      } finally {
        await sub.stop();
      }
    });

    it('no longer resolves a user deleted since an earlier event', async () => {
      const { atrium } = server;
      const admin = await atrium.caller({ role: 'admin' });
      const { owner, subscriber, post, comment } = await scene(atrium);
      const sub = subscribe(transport, server.base, post.id, subscriber.key);
      try {
        const seen = await inPlace(sub, comment, transport);
        await comment('one');
        const before = await sub.event(seen + 1);
        expect(before.errors).toBeUndefined();

        const first = await comment('one again');
        await sub.event(seen + 2);
        await atrium.services.core.users.delete({ ...member(admin.userId), role: 'admin' }, owner.userId);
        // D22: the deleted owner's post, and so its comments, are missing now for everyone: nobody
        // comments on it, and a fresh read of a comment already delivered finds nothing (a stale
        // loader would still have answered it with the deleted user's fields).
        const refused = await comment('two').then(
          () => 'added',
          (err: { code?: string }) => err.code,
        );
        expect(refused).toBe('not_found');
        expect(await queried(server.base, subscriber.key, first.id)).toEqual({
          data: { commentAdded: null },
        });
      } finally {
        await sub.stop();
      }
    });
  });
});
