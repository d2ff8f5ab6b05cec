import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createAtrium, type Atrium } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { startTestAtrium } from '../../helpers/atrium.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { listeningAtrium } from './support.js';
import { wsClient } from './transports.js';

const SUBSCRIPTION =
  'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body post { id } author { handle } } }';

type Comment = { id: string; body: string; post: { id: string }; author: { handle: string } };
type Sub = {
  received: Comment[];
  errors: unknown[];
  completed(): Promise<void>;
  next(): Promise<Comment>;
  stop(): Promise<void>;
};

/** A live subscription over graphql-ws or graphql-sse, collecting what arrives. */
function subscribe(transport: 'WS' | 'SSE', base: string, postId: string, key?: string): Sub {
  const received: Comment[] = [];
  const errors: unknown[] = [];
  const waiters: Array<() => void> = [];
  let complete!: () => void;
  const completed = new Promise<void>((resolve) => (complete = resolve));
  const sink = {
    next: (v: { data?: { commentAdded: Comment }; errors?: unknown[] }) => {
      if (v.data) received.push(v.data.commentAdded);
      if (v.errors) errors.push(...v.errors);
      waiters.splice(0).forEach((w) => w());
    },
    error: (e: unknown) => errors.push(e),
    complete: () => complete(),
  };
  const credentials: Record<string, string> = key ? { 'x-api-key': key } : {};
  const payload = { query: SUBSCRIPTION, variables: { postId } };
  let stop: () => Promise<void>;
  if (transport === 'WS') {
    const client = wsClient(base, credentials);
    const off = client.subscribe(payload, sink as never);
    stop = async () => {
      off();
      await client.dispose();
    };
  } else {
    const client = createSseClient({ url: `${base}/graphql/stream`, headers: credentials, retryAttempts: 0 });
    const off = client.subscribe(payload, sink as never);
    stop = async () => {
      off();
      client.dispose();
    };
  }
  let seen = 0;
  return {
    received,
    errors,
    completed: () => completed,
    stop: () => stop(),
    next: () =>
      new Promise<Comment>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no comment arrived in 5 s')), 5_000);
        const check = () => {
          if (received.length > seen) {
            clearTimeout(timer);
            resolve(received[seen++]!);
          } else waiters.push(check);
        };
        check();
      }),
  };
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Subscription.commentAdded over graphql-ws and graphql-sse', () => {
  const server = listeningAtrium();
  let author: { userId: string; key: string };
  let reader: { userId: string; key: string };
  let published: string;
  let other: string;
  let draft: string;
  const actor = () => ({ id: author.userId, kind: 'user' as const, role: 'member' as const });
  const comment = (postId: string, body: string) =>
    server.atrium.services.core.comments.add(actor(), { body, authorId: author.userId, postId });

  beforeAll(async () => {
    author = await server.atrium.caller({ handle: 'subauthor' });
    reader = await server.atrium.caller({ handle: 'subreader' });
    const posts = server.atrium.services.core.posts;
    published = (await posts.create(actor(), { title: 'Live', body: 'b', authorId: author.userId })).id;
    other = (await posts.create(actor(), { title: 'Other', body: 'b', authorId: author.userId })).id;
    draft = (
      await posts.create(actor(), { title: 'Draft', body: 'b', authorId: author.userId, publishAt: null })
    ).id;
  });

  describe.each(['WS', 'SSE'] as const)('%s', (transport) => {
    it('delivers comments added to the watched post, and only those', async () => {
      const sub = subscribe(transport, server.base, published, reader.key);
      await settle(300);
      await comment(other, 'elsewhere');
      const added = await comment(published, `hello over ${transport}`);
      const got = await sub.next();
      expect(got).toEqual({
        id: added.id,
        body: `hello over ${transport}`,
        post: { id: published },
        author: { handle: 'subauthor' },
      });
      await settle(200);
      expect(sub.received).toHaveLength(1);
      await sub.stop();
    });

    it('ends the stream with UNAUTHENTICATED once its key is revoked or its user deleted', async () => {
      for (const end of ['revoke key', 'delete user'] as const) {
        const watcher = await server.atrium.caller();
        const sub = subscribe(transport, server.base, published, watcher.key);
        await settle(300);
        await comment(published, 'before');
        await sub.next();
        // Straight in the store's terms, as another process (the CLI) would: no signal to this one.
        if (end === 'revoke key') await server.atrium.services.apiKeys.revoke(watcher.keyId);
        else
          await server.atrium.services.store.db
            .updateTable('users')
            .set({ deleted_at: new Date().toISOString() })
            .where('id', '=', watcher.userId)
            .execute();
        await comment(published, 'after');
        await sub.completed();
        expect(
          sub.received.map((c) => c.body),
          end,
        ).toEqual(['before']);
        expect(sub.errors, end).toEqual([
          expect.objectContaining({ extensions: { code: 'UNAUTHENTICATED' } }),
        ]);
        await sub.stop();
      }
    });

    it('gives a caller who cannot see a draft nothing, and its author everything', async () => {
      const outsider = subscribe(transport, server.base, draft, reader.key);
      const anonymous = subscribe(transport, server.base, draft);
      const owner = subscribe(transport, server.base, draft, author.key);
      await settle(300);
      const added = await comment(draft, 'secret');
      expect((await owner.next()).id).toBe(added.id);
      await settle(300);
      expect(outsider.received).toEqual([]);
      expect(anonymous.received).toEqual([]);
      await Promise.all([outsider.stop(), anonymous.stop(), owner.stop()]);
    });

    it('stops giving a draft’s comments to an admin once demoted, by another process too', async () => {
      const admin = await server.atrium.caller({ role: 'admin' });
      const sub = subscribe(transport, server.base, draft, admin.key);
      await settle(300);
      await comment(draft, 'seen as admin');
      expect((await sub.next()).body).toBe('seen as admin');
      // Straight in the store's terms, as another process would: no signal reaches this one.
      await server.atrium.services.store.db
        .updateTable('users')
        .set({ role: 'member' })
        .where('id', '=', admin.userId)
        .execute();
      await comment(draft, 'hidden from members');
      await settle(500);
      // Promoted again, the next one arrives: the one between was read as a member and skipped.
      await server.atrium.services.store.db
        .updateTable('users')
        .set({ role: 'admin' })
        .where('id', '=', admin.userId)
        .execute();
      await comment(draft, 'seen as admin again');
      expect((await sub.next()).body).toBe('seen as admin again');
      expect(sub.received.map((c) => c.body)).toEqual(['seen as admin', 'seen as admin again']);
      expect(sub.errors).toEqual([]);
      await sub.stop();
    });
  });

  it('closes a WebSocket that sends no connection_init within 10 s with 4408', async () => {
    const socket = new WebSocket(`${server.base.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const started = Date.now();
    const code = await new Promise<number>((resolve) => socket.on('close', (c) => resolve(c)));
    expect(code).toBe(4408);
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_500);
  }, 20_000);
});

describe('shutdown closes subscriptions cleanly', () => {
  it('closes WebSockets with 1001 and ends SSE streams when Atrium closes', async () => {
    const atrium = await startTestAtrium();
    const base = (await atrium.listen()).httpUrl!;
    const caller = await atrium.caller({ handle: 'shutdown' });
    const post = await atrium.services.core.posts.create(
      { id: caller.userId, kind: 'user', role: 'member' },
      { title: 'Bye', body: 'b', authorId: caller.userId },
    );
    let wsClosed: number | undefined;
    const ws = wsClient(base, { 'x-api-key': caller.key }, (code) => (wsClosed = code));
    ws.subscribe(
      { query: SUBSCRIPTION, variables: { postId: post.id } },
      { next: () => undefined, error: () => undefined, complete: () => undefined },
    );
    const sse = await fetch(`${base}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': caller.key },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { postId: post.id } }),
    });
    expect(sse.status).toBe(200);
    await settle(300);
    const reader = sse.body!.getReader();
    const ended = (async () => {
      for (;;) if ((await reader.read()).done) return true;
    })();
    await atrium.stop();
    expect(await ended).toBe(true);
    await settle(100);
    expect(wsClosed).toBe(1001);
    await ws.dispose();
  }, 20_000);
});

describe('two instances sharing Redis', () => {
  let database: TestDatabase | { url: string; drop(): Promise<void> };
  let first: Atrium;
  let second: Atrium;
  let secondUrl: string;
  let dir: string | undefined;

  beforeAll(async () => {
    // Both instances must share one store: PostgreSQL, or an SQLite file (not one in memory each).
    const fresh = await freshDatabase();
    if (fresh.dialect === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-two-'));
      database = { url: `sqlite:${join(dir, 'shared.db')}`, drop: async () => undefined };
    } else database = fresh;
    const config = parseConfig({
      NODE_ENV: 'test',
      DATABASE_URL: database.url,
      PORT: '0',
      REDIS_URL: TEST_REDIS_URL,
    });
    first = await createAtrium(config, ['api', 'auth']);
    second = await createAtrium(config, ['api', 'auth']);
    secondUrl = (await second.listen()).httpUrl!;
  });
  afterAll(async () => {
    await first?.close();
    await second?.close();
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(['WS', 'SSE'] as const)(
    '%s: a comment added through one instance reaches a subscriber on the other',
    async (transport) => {
      const core = first.services.core;
      const handle = `two${transport.toLowerCase()}${Date.now().toString(36)}`;
      const user = await core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: 'Two Instances',
        role: 'member',
      });
      const key = await first.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
      const actor = { id: user.id, kind: 'user' as const, role: 'member' as const };
      const post = await core.posts.create(actor, { title: 'Shared', body: 'b', authorId: user.id });
      const sub = subscribe(transport, secondUrl, post.id, key.key);
      await settle(300);
      const added = await core.comments.add(actor, {
        body: 'from the first instance',
        authorId: user.id,
        postId: post.id,
      });
      expect((await sub.next()).id).toBe(added.id);
      await settle(300);
      expect(sub.received).toHaveLength(1);
      await sub.stop();
    },
  );
});
