import { createClient } from 'graphql-ws';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { WS_KEEPALIVE_MS } from '../../../src/graphql/transports/websocket.js';
import { until } from '../../helpers/wait.js';
import { authorWithPost, listeningAtrium } from './support.js';
import { rawSubscription } from './transports.js';

/**
 * The server pings every graphql-ws socket (docs/graphql.md, Subscriptions): the pings are traffic,
 * so a proxy's read timeout longer than the interval never closes an idle subscription, and a peer
 * that does not answer (gone without a FIN) is cut, its operations ended as a close ends them. Here
 * with the interval shortened through the test hook (ServicesOptions.wsKeepAliveMs); in production
 * it is WS_KEEPALIVE_MS.
 */
const INTERVAL_MS = 300;
const SUBSCRIPTION = 'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body } }';

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('graphql-ws keep-alive pings', () => {
  const server = listeningAtrium({}, { wsKeepAliveMs: INTERVAL_MS });
  const wsUrl = () => `${server.base.replace(/^http/, 'ws')}/graphql`;

  /** A gauge's value as GET /metrics serves it. */
  async function gauge(name: string): Promise<number> {
    const text = await (await fetch(`${server.base}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (line === undefined) throw new Error(`${name} is not on /metrics`);
    return Number(line.split(' ')[1]);
  }

  it('keeps the production interval under any proxy read timeout worth having', () => {
    // nginx's default proxy_read_timeout is 60 s; the shipped config has 1 h for /graphql.
    expect(WS_KEEPALIVE_MS).toBeLessThanOrEqual(30_000);
  });

  it('pings a graphql-ws client every interval, and its subscription stays open and delivers', async () => {
    const { atrium } = server;
    const author = await authorWithPost(atrium, 'pinged', 'Pinged');
    let pings = 0;
    // The real graphql-ws client over a ws socket that counts the server's ping frames (ws answers
    // each with a pong by itself).
    class Counting extends WebSocket {
      constructor(address: string, protocols?: string | string[]) {
        super(address, protocols);
        this.on('ping', () => (pings += 1));
      }
    }
    let closed: number | undefined;
    const client = createClient({
      url: wsUrl(),
      webSocketImpl: Counting,
      connectionParams: { 'x-api-key': author.key },
      retryAttempts: 0,
      on: { closed: (e) => (closed = (e as { code: number }).code) },
    });
    const events: unknown[] = [];
    const failures: unknown[] = [];
    let completed = false;
    const off = client.subscribe(
      { query: SUBSCRIPTION, variables: { postId: author.postId } },
      {
        next: (v) => events.push(v),
        error: (e) => failures.push(e),
        complete: () => (completed = true),
      },
    );
    try {
      await until(async () => (await gauge('atrium_graphql_ws_operations')) === 1, 'the subscription');
      await settle(INTERVAL_MS * 6);
      expect(pings).toBeGreaterThanOrEqual(4);
      expect({ closed, failures, completed }).toEqual({ closed: undefined, failures: [], completed: false });
      const member = { id: author.userId, kind: 'user' as const, role: 'member' as const };
      const comment = await atrium.services.core.comments.add(member, {
        body: 'still there',
        authorId: author.userId,
        postId: author.postId,
      });
      await until(() => events.length > 0, 'the comment over the pinged subscription');
      expect(events).toEqual([{ data: { commentAdded: { id: comment.id, body: 'still there' } } }]);
    } finally {
      off();
      await client.dispose();
    }
  });

  it('cuts a socket that does not answer the pings, and its subscription ends', async () => {
    const author = await authorWithPost(server.atrium, 'deaf', 'Deaf');
    const counts = async () => [
      await gauge('atrium_graphql_ws_connections'),
      await gauge('atrium_graphql_ws_operations'),
    ];
    // The previous test's client may still be closing.
    await until(async () => (await counts()).every((n) => n === 0), 'no connection open before');
    // A peer that no longer answers: ws does not pong by itself with autoPong off.
    const ws = new WebSocket(wsUrl(), 'graphql-transport-ws', { autoPong: false });
    let pings = 0;
    ws.on('ping', () => (pings += 1));
    ws.on('error', () => undefined);
    const closed = new Promise<{ code: number; at: number }>((resolve) =>
      ws.once('close', (code) => resolve({ code, at: Date.now() })),
    );
    await rawSubscription(ws, author.key, { query: SUBSCRIPTION, variables: { postId: author.postId } });
    const subscribedAt = Date.now();
    await until(async () => (await gauge('atrium_graphql_ws_operations')) === 1, 'the subscription');
    expect(await counts()).toEqual([1, 1]);
    // Cut once a ping has gone a whole interval unanswered: about two intervals from the start.
    const { code, at } = await Promise.race([
      closed,
      settle(INTERVAL_MS * 10).then(() => ({ code: -1, at: Date.now() })),
    ]);
    expect(code).toBe(1006);
    expect(pings).toBeGreaterThanOrEqual(1);
    expect(at - subscribedAt).toBeLessThan(INTERVAL_MS * 4);
    // The server let go of the connection and of its subscription.
    await until(
      async () => (await counts()).every((n) => n === 0),
      'the cut connection and its subscription to be dropped',
    );
  });
});
