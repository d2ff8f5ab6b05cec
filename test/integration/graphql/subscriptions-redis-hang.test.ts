import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Atrium, createAtrium } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { SUBSCRIBER_PING_MS } from '../../../src/shared/redis-broadcast.js';
import { REDIS_SOCKET_TIMEOUT_MS } from '../../../src/shared/redis-connection.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { testDialect } from '../../helpers/database.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { wsClient } from './transports.js';
import { until } from '../../helpers/wait.js';

/**
 * GraphQL subscriptions (commentAdded) through the clients their users use, graphql-ws over `ws`
 * and graphql-sse, while the Redis that carries the broadcast hangs (its connections stay open,
 * nothing answers; the shared Redis behind a relay that stops forwarding) and after it answers
 * again; a second instance, whose own path to Redis never hangs, hears what Redis carries live
 * and, once this instance can publish again, reads what it missed from the store.
 * docs/deployment.md, "When Redis or PostgreSQL fails".
 *
 * Bounds are loose (a loaded 2-vCPU machine): they tell "answered" from "held until
 * REQUEST_TIMEOUT_MS (30 s)", nothing finer.
 */
const BOUNDED_MS = 5_000;
const ARRIVAL_MS = 10_000;

const SUBSCRIPTION =
  'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body post { id } } }';
const ADD_COMMENT = `mutation($in: AddCommentInput!) { addComment(input: $in) {
  comment { id body } errors { field message } } }`;

type Transport = 'WS' | 'SSE';

/** One live subscription through the real client, keeping everything it is told. */
interface Sub {
  readonly transport: Transport;
  readonly ids: string[];
  readonly errors: unknown[];
  readonly ended: { value: boolean };
  stop(): Promise<void>;
}

function subscribe(transport: Transport, base: string, postId: string, key: string): Sub {
  const ids: string[] = [];
  const errors: unknown[] = [];
  const ended = { value: false };
  const sink = {
    next: (v: { data?: { commentAdded: { id: string } }; errors?: unknown[] }) => {
      if (v.data?.commentAdded) ids.push(v.data.commentAdded.id);
      if (v.errors) errors.push(...v.errors);
    },
    error: (e: unknown) => {
      errors.push(e);
      ended.value = true;
    },
    complete: () => (ended.value = true),
  };
  const payload = { query: SUBSCRIPTION, variables: { postId } };
  if (transport === 'WS') {
    const client = wsClient(base, { 'x-api-key': key });
    const off = client.subscribe(payload, sink as never);
    return {
      transport,
      ids,
      errors,
      ended,
      stop: async () => {
        off();
        await client.dispose();
      },
    };
  }
  const client = createSseClient({
    url: `${base}/graphql/stream`,
    headers: { 'x-api-key': key },
    retryAttempts: 0,
  });
  const off = client.subscribe(payload, sink as never);
  return {
    transport,
    ids,
    errors,
    ended,
    stop: async () => {
      off();
      client.dispose();
    },
  };
}

async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = ARRIVAL_MS,
): Promise<void> {
  return until(check, what, ms, 100);
}

const timed = async <T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> => {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
};

/**
 * An Atrium whose Redis is the shared one behind a relay (TcpProxy), listening, with a post, its
 * author and a reader, for the enclosing describe block; subscriptions opened through it are
 * stopped after the block.
 */
function relayedAtrium(options: { second?: boolean } = {}) {
  const log = memoryLog('warn');
  let proxy: TcpProxy;
  let atrium: TestAtrium;
  let base: string;
  let second: Atrium | undefined;
  let secondBase: string | undefined;
  let dir: string | undefined;
  let author: { userId: string; key: string; headers: Record<string, string> };
  let reader: { userId: string; key: string };
  let postId: string;
  const subs: Sub[] = [];

  beforeAll(async () => {
    const redisUrl = new URL(TEST_REDIS_URL);
    proxy = await TcpProxy.start({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    redisUrl.host = `127.0.0.1:${proxy.port}`;
    const env: Record<string, string> = {
      REDIS_URL: redisUrl.toString(),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    };
    // A second instance shares the store: PostgreSQL, or an SQLite file (not one in memory each).
    if (options.second && testDialect() === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-subs-hang-'));
      env.DATABASE_URL = `sqlite:${join(dir, 'shared.db')}`;
    }
    atrium = await startTestAtrium(env);
    atrium.services.sharedHealth.useLogger(log.logger);
    base = (await atrium.listen()).httpUrl!;
    if (options.second) {
      // Another instance, with its own path to the same Redis: what it publishes reaches this
      // instance's subscribers only through this instance's listening connection.
      second = await createAtrium(
        parseConfig({
          NODE_ENV: 'test',
          LOG_LEVEL: 'silent',
          DATABASE_URL: env.DATABASE_URL ?? atrium.database.url,
          PORT: '0',
          HOST: '127.0.0.1',
          REDIS_URL: TEST_REDIS_URL,
        }),
        ['api', 'auth'],
      );
      secondBase = (await second.listen()).httpUrl!;
    }
    author = await atrium.caller({ handle: `hangauthor${process.pid}` });
    reader = await atrium.caller({ handle: `hangreader${process.pid}` });
    const actor = { id: author.userId, kind: 'user' as const, role: 'member' as const };
    postId = (
      await atrium.services.core.posts.create(actor, { title: 'Hang', body: 'b', authorId: author.userId })
    ).id;
  });
  afterAll(async () => {
    proxy?.resume();
    await Promise.all(subs.map((s) => s.stop().catch(() => undefined)));
    await second?.close();
    await atrium?.stop();
    await proxy?.cut().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * addComment over HTTP POST, as a user's client sends it; to this instance or the second, on
   * the block's post or another.
   */
  const addComment = async (body: string, to: 'here' | 'second' = 'here', onPost = postId) => {
    const res = await fetch(`${to === 'here' ? base : secondBase}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...author.headers },
      body: JSON.stringify({
        query: ADD_COMMENT,
        variables: { in: { body, authorId: author.userId, postId: onPost } },
      }),
    });
    const json = (await res.json()) as {
      data?: { addComment: { comment: { id: string } | null; errors: unknown[] } };
      errors?: unknown[];
    };
    return { status: res.status, json, id: json.data?.addComment.comment?.id };
  };

  /** Subscriptions set up so far (each counted once its stream exists on the server). */
  const subscriptionsSetUp = async (transport: Transport, at: string): Promise<number> => {
    const text = await (await fetch(`${at}/metrics`)).text();
    const label = transport === 'WS' ? 'ws' : 'sse';
    const match = new RegExp(
      `^atrium_graphql_operations_total\\{transport="${label}",operation_type="subscription",outcome="ok"\\} (\\d+)$`,
      'm',
    ).exec(text);
    return match ? Number(match[1]) : 0;
  };

  /** Opens one subscription per transport and waits until the server has set both up. */
  const openBoth = async (on: 'here' | 'second' = 'here'): Promise<Sub[]> => {
    const at = on === 'here' ? base : secondBase!;
    const opened: Sub[] = [];
    for (const transport of ['WS', 'SSE'] as const) {
      const before = await subscriptionsSetUp(transport, at);
      const sub = subscribe(transport, at, postId, reader.key);
      subs.push(sub);
      opened.push(sub);
      await waitFor(
        async () => (await subscriptionsSetUp(transport, at)) > before,
        `a ${transport} subscription`,
      );
    }
    return opened;
  };

  const metric = async (pattern: RegExp): Promise<number | undefined> => {
    const match = pattern.exec(await (await fetch(`${base}/metrics`)).text());
    return match ? Number(match[1]) : undefined;
  };

  const state = (list: Sub[]) =>
    list.map((s) => ({ transport: s.transport, errors: s.errors, ended: s.ended.value }));
  const open = (list: Sub[]) => list.map((s) => ({ transport: s.transport, errors: [], ended: false }));
  const comment = (body: string) =>
    atrium.services.core.comments.add(
      { id: author.userId, kind: 'user', role: 'member' },
      { body, authorId: author.userId, postId },
    );

  /** A subscription on this instance to `onPost`, as the post's author or as a reader. */
  const subscribeAs = async (
    who: 'author' | 'reader',
    transport: Transport,
    onPost: string,
  ): Promise<Sub> => {
    const before = await subscriptionsSetUp(transport, base);
    const sub = subscribe(transport, base, onPost, who === 'author' ? author.key : reader.key);
    subs.push(sub);
    await waitFor(
      async () => (await subscriptionsSetUp(transport, base)) > before,
      `a ${transport} subscription`,
    );
    return sub;
  };
  /** A draft of the block's author: only they (and admins) see it and its comments. */
  const draft = async () => {
    const actor = { id: author.userId, kind: 'user' as const, role: 'member' as const };
    const post = await atrium.services.core.posts.create(actor, {
      title: 'Draft',
      body: 'b',
      authorId: author.userId,
      publishAt: null,
    });
    return {
      id: post.id,
      publish: () => atrium.services.core.posts.update(actor, post.id, { publishAt: new Date() }),
    };
  };

  return {
    log,
    proxy: () => proxy,
    atrium: () => atrium,
    subscribeAs,
    draft,
    addComment,
    openBoth,
    metric,
    state,
    open,
    comment,
  };
}

describe('commentAdded over graphql-ws and graphql-sse while Redis hangs, and after', () => {
  const { log, proxy, addComment, openBoth, metric, state, open, comment } = relayedAtrium({ second: true });

  let before: Sub[];
  /**
   * On another instance, whose path to Redis never hangs: it hears what Redis carries, and what it
   * missed once this instance can tell it.
   */
  let elsewhere: Sub[];
  let during: Sub[];
  let after: Sub[];
  const added: Record<'first' | 'inFlight' | 'hung' | 'later' | 'back', string> = {
    first: '',
    inFlight: '',
    hung: '',
    later: '',
    back: '',
  };

  it('delivers a comment to both transports while Redis answers', async () => {
    before = await openBoth();
    elsewhere = await openBoth('second');
    const first = await addComment('before the hang');
    expect(first.status).toBe(200);
    added.first = first.id!;
    await waitFor(
      () => [...before, ...elsewhere].every((s) => s.ids.includes(added.first)),
      'the comment on both transports, on both instances',
    );
  });

  it('a comment added just as Redis hangs (its publish sent, never answered) reaches the subscribers here', async () => {
    proxy().hang();
    // The first call to Redis since the hang is this comment's publish: sent, then held by the relay.
    added.inFlight = (await comment('as Redis hangs')).id;
    await waitFor(
      () => before.every((s) => s.ids.includes(added.inFlight)),
      'the comment on both transports',
    );
    expect(state(before)).toEqual(open(before));
  });

  it('while Redis hangs: new subscriptions open, addComment answers in bounded time, every subscriber here hears it', async () => {
    const opened = await timed(openBoth);
    during = opened.value;
    // Two subscriptions set up one after the other, each bounded like any request.
    expect(opened.ms).toBeLessThan(2 * BOUNDED_MS);

    const hung = await timed(() => addComment('during the hang'));
    expect(hung.value.status).toBe(200);
    expect(hung.value.json.errors).toBeUndefined();
    expect(hung.value.json.data!.addComment.errors).toEqual([]);
    expect(hung.ms).toBeLessThan(BOUNDED_MS);
    added.hung = hung.value.id!;
    await waitFor(
      () => [...before, ...during].every((s) => s.ids.includes(added.hung)),
      'the comment on all four subscriptions',
    );
    expect(state([...before, ...during])).toEqual(open([...before, ...during]));
    expect(await metric(/^atrium_redis_up (\d+)$/m)).toBe(0);
    expect(
      await metric(/^atrium_shared_state_degraded_total\{component="broadcast"\} (\d+)$/m),
    ).toBeGreaterThanOrEqual(2);
  });

  it("a hang that outlasts the socket timeout and the listening connection's PING changes none of that", async () => {
    // Both connections are dropped by now (no answer within 2 s) and their reconnections hang too.
    await new Promise((resolve) => setTimeout(resolve, SUBSCRIBER_PING_MS + 2 * REDIS_SOCKET_TIMEOUT_MS));
    const later = await timed(() => addComment('later in the hang'));
    expect(later.value.status).toBe(200);
    expect(later.ms).toBeLessThan(BOUNDED_MS);
    added.later = later.value.id!;
    await waitFor(
      () => [...before, ...during].every((s) => s.ids.includes(added.later)),
      'the comment on all four subscriptions',
    );
    expect(state([...before, ...during])).toEqual(open([...before, ...during]));
  });

  it('after Redis answers again: comments reach subscriptions opened before, during and after the hang, once each', async () => {
    proxy().resume();
    await waitFor(async () => (await metric(/^atrium_redis_up (\d+)$/m)) === 1, 'Redis to answer', 20_000);
    after = await openBoth();
    const back = await addComment('after the hang');
    expect(back.status).toBe(200);
    added.back = back.id!;
    const all = [...before, ...during, ...after];
    await waitFor(() => all.every((s) => s.ids.includes(added.back)), 'the comment on all six subscriptions');
    // Time for a late copy of the publish held by the hang to arrive, if it were not dropped.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const s of before)
      expect(s.ids).toEqual([added.first, added.inFlight, added.hung, added.later, added.back]);
    for (const s of during) expect(s.ids).toEqual([added.hung, added.later, added.back]);
    for (const s of after) expect(s.ids).toEqual([added.back]);
    expect(state(all)).toEqual(open(all));
    // The other instance heard nothing of what Redis could not carry, and could not know it
    // missed anything (its own path to Redis never failed): this instance tells it, once it can
    // publish again, and it reads those comments from the store, in order, each once (the publish
    // sent as Redis hung may also reach Redis late, and be heard live: still once).
    const missed = [added.inFlight, added.hung, added.later];
    await waitFor(
      () => elsewhere.every((s) => [...missed, added.back].every((id) => s.ids.includes(id))),
      'every comment on the other instance',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const s of elsewhere) {
      expect([...s.ids].sort()).toEqual([added.first, ...missed, added.back].sort());
      expect(s.ids[0]).toBe(added.first);
      expect(s.ids.filter((id) => missed.includes(id))).toEqual(missed);
    }
    expect(state(elsewhere)).toEqual(open(elsewhere));

    const lines = log.lines.map((l) => String(l.msg));
    expect(lines.filter((m) => m.startsWith('Redis unavailable: comment'))).toEqual([
      'Redis unavailable: comment events reach only the GraphQL subscribers of this instance',
    ]);
    expect(lines.filter((m) => m.startsWith('Redis is back'))).toHaveLength(1);
  });
});

/**
 * The path to Redis forgets its connections (a NAT or firewall that dropped its state, a Redis
 * restarted behind a partition): no refusal, no reset, the old connections just never answer
 * again, while new ones work. Atrium's connection for commands notices on its next call; the
 * connection that listens to the broadcast sends nothing while idle, so it must find out by
 * itself (its PING), or every subscription of this instance would stay open and hear nothing for
 * good. What Redis carried while it was dead is caught up from the store once it is replaced.
 */
describe('commentAdded after the path to Redis forgot its connections', () => {
  const { proxy, addComment, openBoth, metric, state, open } = relayedAtrium({ second: true });

  it('a comment added on another instance while the listening connection here is dead reaches both transports once it is replaced, once; later ones too', async () => {
    const subs = await openBoth();
    const first = await addComment('before', 'second');
    await waitFor(() => subs.every((s) => s.ids.includes(first.id!)), 'a comment from the other instance');

    proxy().forget();
    // Added on the other instance while this instance's listening connection is dead: Redis
    // carries it, to nobody here. It must arrive once the connection is replaced (about 7 s).
    const inGap = await addComment('while the listening connection here is dead', 'second');
    expect(inGap.status).toBe(200);
    // Published into a forgotten connection, never answered: this instance's subscribers have it
    // at once, directly, and the catch-up that reads it again must not repeat it.
    const unanswered = await timed(() => addComment('into the forgotten connection'));
    expect(unanswered.value.status).toBe(200);
    expect(unanswered.ms).toBeLessThan(BOUNDED_MS);
    await waitFor(() => subs.every((s) => s.ids.includes(unanswered.value.id!)), 'the comment here');

    await waitFor(
      () => subs.every((s) => s.ids.includes(inGap.id!)),
      'the comment added on the other instance during the gap',
      SUBSCRIBER_PING_MS + 2 * REDIS_SOCKET_TIMEOUT_MS + ARRIVAL_MS,
    );
    await waitFor(async () => (await metric(/^atrium_redis_up (\d+)$/m)) === 1, 'Redis to answer', 20_000);

    // Listening again: later comments arrive live, from either instance, once each.
    const fromSecond = await addComment('again from the other instance', 'second');
    const fromHere = await addComment('again from this instance');
    await waitFor(
      () => subs.every((s) => s.ids.includes(fromSecond.id!) && s.ids.includes(fromHere.id!)),
      'the last two comments',
    );
    // Time for a repeat to show, were one coming (a late copy, a second catch-up).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const s of subs) {
      expect(s.ids.slice(0, 3)).toEqual([first.id, unanswered.value.id, inGap.id]);
      // Two instances publish independently: either may come first.
      expect(s.ids.slice(3).sort()).toEqual([fromSecond.id, fromHere.id].sort());
    }
    expect(state(subs)).toEqual(open(subs));
  }, 90_000);
});

/**
 * What is caught up after the gap goes through the same delivery as what is heard live: read as
 * the subscriber, so a comment on a draft reaches its author and not a reader.
 */
describe('commentAdded caught up after a gap, on a draft', () => {
  const { proxy, addComment, subscribeAs, draft, metric, state, open } = relayedAtrium({ second: true });

  it("reaches the draft's author once and not a reader, on both transports; the reader's subscription stays open", async () => {
    const post = await draft();
    const subs: Record<'author' | 'reader', Sub[]> = { author: [], reader: [] };
    for (const who of ['author', 'reader'] as const)
      for (const transport of ['WS', 'SSE'] as const)
        subs[who].push(await subscribeAs(who, transport, post.id));
    const all = [...subs.author, ...subs.reader];

    proxy().forget();
    const inGap = await addComment('on the draft, during the gap', 'second', post.id);
    expect(inGap.status).toBe(200);
    expect(inGap.json.errors).toBeUndefined();
    await waitFor(
      () => subs.author.every((s) => s.ids.includes(inGap.id!)),
      "the draft's comment added during the gap, at its author",
      SUBSCRIBER_PING_MS + 2 * REDIS_SOCKET_TIMEOUT_MS + ARRIVAL_MS,
    );
    await waitFor(async () => (await metric(/^atrium_redis_up (\d+)$/m)) === 1, 'Redis to answer', 20_000);

    // Published now: the next comment reaches the reader too, the one caught up before does not.
    await post.publish();
    const published = await addComment('after publishing', 'second', post.id);
    await waitFor(() => all.every((s) => s.ids.includes(published.id!)), 'the comment after publishing');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const s of subs.author) expect(s.ids).toEqual([inGap.id, published.id]);
    for (const s of subs.reader) expect(s.ids).toEqual([published.id]);
    expect(state(all)).toEqual(open(all));
  }, 90_000);
});

/** No interruption: catch-up has nothing to add, and nothing is delivered twice. */
describe('commentAdded across two instances while Redis answers throughout', () => {
  const { addComment, openBoth, state, open } = relayedAtrium({ second: true });

  it('each comment reaches both transports once, whichever instance added it', async () => {
    const subs = await openBoth();
    const ids: string[] = [];
    for (const [i, to] of (['second', 'here', 'second', 'here'] as const).entries()) {
      const added = await addComment(`comment ${i}`, to);
      expect(added.status).toBe(200);
      ids.push(added.id!);
    }
    await waitFor(() => subs.every((s) => ids.every((id) => s.ids.includes(id))), 'the four comments');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const s of subs) expect([...s.ids].sort()).toEqual([...ids].sort());
    expect(state(subs)).toEqual(open(subs));
  });
});
