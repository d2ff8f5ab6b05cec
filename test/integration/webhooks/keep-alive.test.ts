import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookSender } from '../../../src/webhooks/sender.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint, sleep } from './support.js';

/**
 * Keep-alive sockets and receivers that close idle connections. A receiver closes a connection it
 * has kept idle for its keep-alive timeout (Node and Express: 5 s); a request the sender writes on
 * that socket at the same moment is reset before any answer (`ECONNRESET: socket hang up`), and the
 * receiver never sees it. Such a reset must not cost an attempt.
 */

interface IdleReceiver {
  url: (path: string) => string;
  /** Requests that arrived complete, in order, with the connection each came on. */
  requests: Array<{ path: string; attempt: number; connection: number; at: number; answeredAt?: number }>;
  connections: () => number;
  stop: () => Promise<void>;
}

/**
 * A receiver that closes a connection exactly `idleMs` after its last answer, and sends no
 * `Keep-Alive: timeout=` hint (as a receiver behind a proxy, or any server but Node's own, often
 * does). Node's own server waits its keepAliveTimeout plus one second and announces the timeout,
 * which hides the race; this one does not. `onRequest` may kill the socket instead of answering.
 */
async function idleReceiver(
  idleMs: number,
  onRequest: (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    info: { connection: number; nthOnConnection: number },
  ) => boolean = () => true,
  answerDelayMs = 0,
): Promise<IdleReceiver> {
  const requests: IdleReceiver['requests'] = [];
  const sockets = new Set<Socket>();
  const ids = new WeakMap<Socket, { id: number; count: number; idle?: NodeJS.Timeout }>();
  let opened = 0;
  const server = http.createServer((req, res) => {
    const state = ids.get(req.socket)!;
    clearTimeout(state.idle);
    state.count += 1;
    if (!onRequest(req, res, { connection: state.id, nthOnConnection: state.count })) return;
    req.resume();
    req.on('end', () => {
      const item: IdleReceiver['requests'][number] = {
        path: req.url ?? '',
        attempt: Number(req.headers['x-webhook-attempt']),
        connection: state.id,
        at: performance.now(),
      };
      requests.push(item);
      res.on('finish', () => {
        item.answeredAt = performance.now();
        state.idle = setTimeout(() => req.socket.destroy(), idleMs);
      });
      setTimeout(() => res.writeHead(200, { 'content-length': '2' }).end('ok'), answerDelayMs);
    });
  });
  // Node's own idle timer is off: the receiver closes idle connections itself, at exactly idleMs.
  server.keepAliveTimeout = 0;
  server.on('connection', (socket: Socket) => {
    opened += 1;
    ids.set(socket, { id: opened, count: 0 });
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    requests,
    connections: () => opened,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the sender', () => {
  const body = '{"id":"evt_x"}';
  const headers = { 'x-webhook-attempt': '1' };

  it('sends again at once on a fresh connection when a reused socket is reset before any answer', async () => {
    // The receiver kills every connection's second request without a byte of answer: what a
    // receiver closing an idle socket does to a request that crossed its close.
    const receiver = await idleReceiver(60_000, (req, _res, { nthOnConnection }) => {
      if (nthOnConnection === 1) return true;
      req.socket.destroy();
      return false;
    });
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: true });
    try {
      const first = await sender.send({ url: receiver.url('/a'), body, headers });
      expect(first.result).toEqual({ kind: 'response', status: 200 });
      const second = await sender.send({ url: receiver.url('/b'), body, headers });
      expect(second.result).toEqual({ kind: 'response', status: 200 });
      expect(receiver.requests.map((r) => [r.path, r.connection])).toEqual([
        ['/a', 1],
        ['/b', 2],
      ]);
    } finally {
      sender.close();
      await receiver.stop();
    }
  });

  it('does not send again when a fresh connection is reset: that is a connection error', async () => {
    let seen = 0;
    const receiver = await idleReceiver(60_000, (req) => {
      seen += 1;
      req.socket.destroy();
      return false;
    });
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: true });
    try {
      const outcome = await sender.send({ url: receiver.url('/reset'), body, headers });
      expect(outcome.result).toMatchObject({
        kind: 'connection',
        message: expect.stringMatching(/ECONNRESET/),
      });
      expect(seen).toBe(1);
      expect(receiver.connections()).toBe(1);
    } finally {
      sender.close();
      await receiver.stop();
    }
  });

  it('does not send again when the reused socket is reset after the answer began', async () => {
    // First request answered normally; the second gets the status line, then the connection dies.
    let seen = 0;
    const receiver = await idleReceiver(60_000, (req, res, { nthOnConnection }) => {
      seen += 1;
      if (nthOnConnection === 1) return true;
      res.socket!.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial');
      setTimeout(() => req.socket.destroy(), 20);
      return false;
    });
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: true });
    try {
      await sender.send({ url: receiver.url('/a'), body, headers });
      await sender.send({ url: receiver.url('/b'), body, headers });
      expect(seen).toBe(2);
      expect(receiver.connections()).toBe(1);
    } finally {
      sender.close();
      await receiver.stop();
    }
  });

  it('closes pooled sockets idle longer than its idle limit, and never an active one', async () => {
    const receiver = await idleReceiver(60_000, () => true, 0);
    const sender = new WebhookSender({ timeoutMs: 5000, allowPrivate: true, idleSocketMs: 150 });
    try {
      await sender.send({ url: receiver.url('/1'), body, headers });
      await sleep(20);
      await sender.send({ url: receiver.url('/2'), body, headers }); // reused: idle 20 ms
      await sleep(400);
      await sender.send({ url: receiver.url('/3'), body, headers }); // the pooled one was closed
      expect(receiver.requests.map((r) => r.connection)).toEqual([1, 1, 2]);
    } finally {
      sender.close();
      await receiver.stop();
    }
    // An answer that takes longer than the idle limit is waited for (the attempt's own timeout rules).
    const slow = await idleReceiver(60_000, () => true, 600);
    const sender2 = new WebhookSender({ timeoutMs: 5000, allowPrivate: true, idleSocketMs: 150 });
    try {
      const outcome = await sender2.send({ url: slow.url('/slow'), body, headers });
      expect(outcome.result).toEqual({ kind: 'response', status: 200 });
      expect(outcome.durationMs).toBeGreaterThanOrEqual(590);
    } finally {
      sender2.close();
      await slow.stop();
    }
  });

  it('the per-attempt timeout still covers both sends of an attempt', async () => {
    // Second request on the connection: killed; the fresh connection's request is never answered.
    const receiver = await idleReceiver(60_000, (req, _res, { connection, nthOnConnection }) => {
      if (connection === 1 && nthOnConnection === 1) return true;
      if (connection === 1) req.socket.destroy();
      return false; // held: never answered
    });
    const sender = new WebhookSender({ timeoutMs: 300, allowPrivate: true });
    try {
      await sender.send({ url: receiver.url('/a'), body, headers });
      const outcome = await sender.send({ url: receiver.url('/b'), body, headers });
      expect(outcome.result).toEqual({ kind: 'timeout' });
      expect(outcome.durationMs).toBeLessThan(1000);
      expect(receiver.connections()).toBe(2);
    } finally {
      sender.close();
      await receiver.stop();
    }
  });
});

describe('deliveries to a receiver with a short keep-alive timeout', () => {
  const IDLE_MS = 300;
  let atrium: TestAtrium;
  let catalogue: Catalogue;
  let receiver: IdleReceiver;

  beforeAll(async () => {
    atrium = await startTestAtrium({ WEBHOOK_BACKOFF_BASE_MS: '5000' }, ['api', 'auth', 'worker']);
    catalogue = await makeCatalogue(atrium);
    receiver = await idleReceiver(IDLE_MS);
  });

  afterAll(async () => {
    await atrium?.stop();
    await receiver?.stop();
  });

  it('every delivery spaced around the idle timeout succeeds at attempt 1', async () => {
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, { url: receiver.url('/idle') });
    // Each order is timed so that its POST reaches the receiver from a little before to a little
    // after the receiver closes the connection idle since its last answer. The time from an order
    // to its POST (the worker's latency: commit, wake-up, claim) is measured on every delivery and
    // aimed around, so the sweep crosses the close on a loaded machine and on either engine.
    const offsets: number[] = [];
    for (let o = -40; o <= 12; o += 2) offsets.push(o);
    let latency = 0;
    const idleGaps: number[] = [];
    for (const [i, offset] of [0, ...offsets].entries()) {
      if (i > 0) {
        const lastAnswer = receiver.requests[i - 1]!.answeredAt!;
        await sleep(Math.max(0, lastAnswer + IDLE_MS + offset - latency - performance.now()));
      }
      const ordered = performance.now();
      const res = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
      expect(res.status).toBe(201);
      const deadline = Date.now() + 8000;
      while (receiver.requests.length < i + 1 && Date.now() < deadline) await sleep(1);
      expect(receiver.requests.length, `delivery ${i + 1} did not arrive at once`).toBe(i + 1);
      latency = receiver.requests[i]!.at - ordered;
      if (i > 0) idleGaps.push(Math.round(receiver.requests[i]!.at - receiver.requests[i - 1]!.answeredAt!));
      while (receiver.requests[i]!.answeredAt === undefined) await sleep(1);
    }
    const waits = [0, ...offsets];
    const list = async (what: 'attempts' | 'deliveries') => {
      const res = await api(
        atrium,
        'GET',
        `/api/v2/webhook_endpoints/${endpoint.id}/${what}?limit=100`,
        who.headers,
      );
      expect(res.status).toBe(200);
      return (res.body as { data: Array<Record<string, unknown>> }).data;
    };
    // The last outcome is written just after its answer.
    let attempts = await list('attempts');
    for (let tries = 0; attempts.length < waits.length && tries < 100; tries++) {
      await sleep(50);
      attempts = await list('attempts');
    }
    expect(attempts.filter((a) => a.error !== null)).toEqual([]);
    expect(attempts).toHaveLength(waits.length);
    expect(attempts.every((a) => a.attempt === 1 && a.status_code === 200)).toBe(true);
    const deliveries = await list('deliveries');
    expect(deliveries).toHaveLength(waits.length);
    expect(deliveries.every((d) => d.status === 'delivered' && d.attempt_count === 1)).toBe(true);
    expect(receiver.requests.every((r) => r.attempt === 1)).toBe(true);
    // The sweep did reuse connections (otherwise it tested nothing) and opened new ones.
    const connections = new Set(receiver.requests.map((r) => r.connection)).size;
    expect(connections).toBeGreaterThan(1);
    expect(connections, `idle gaps ${idleGaps.join(' ')}`).toBeLessThan(waits.length);
  }, 60_000);
});
