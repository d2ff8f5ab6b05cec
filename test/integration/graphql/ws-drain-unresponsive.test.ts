import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { closeServices, createServices } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { WS_CLOSE_GRACE_MS } from '../../../src/graphql/transports/websocket.js';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';
import { rawSubscription } from './transports.js';

/**
 * SIGTERM to a real `atrium serve --role api` while a graphql-ws subscriber has stopped answering:
 * it subscribed to commentAdded, then stopped reading its socket (a frozen tab, a stopped process),
 * so it never answers the server's 1001 close frame. docs/deployment.md, "Stopping, draining".
 *
 * Before the fix the drain waited on that socket (ws's own 30 s close timer), Fastify's close gave
 * up meanwhile, Redis and the database pool were never closed, and the process stayed alive for ever
 * though it had logged "drain took too long; exiting" at 30 s. A second SIGTERM killed it by the
 * signal itself (no exit status, no log line); it now exits 1 and says why.
 */

/** Loose: "ended after the WebSocket grace period", not "held for 30 s or for ever". */
const DRAIN_BOUND_MS = WS_CLOSE_GRACE_MS + 10_000;

const SUBSCRIPTION = 'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id } }';

describe('SIGTERM with an unresponsive WebSocket subscriber', () => {
  let database: TestDatabase;
  let key: string;
  let postId: string;
  let served: Served | undefined;
  let socket: WebSocket | undefined;

  beforeAll(async () => {
    // A file on SQLite, not the in-memory default: the child process opens the same database.
    database = await sharedDatabase();
    const services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }));
    try {
      const user = await services.core.users.create({ handle: 'frozen', email: 'frozen@example.com' });
      key = (await services.apiKeys.create({ userId: user.id, tier: 'enterprise' })).key;
      const post = await services.core.posts.create(
        { id: user.id, kind: 'user', role: 'member' },
        { title: 'Watched', body: 'b', authorId: user.id },
      );
      postId = post.id;
    } finally {
      await closeServices(services);
    }
  });
  afterEach(async () => {
    socket?.terminate();
    socket = undefined;
    if (served && served.child.exitCode === null && served.child.signalCode === null) await served.kill9();
    served = undefined;
  });
  afterAll(async () => {
    await database?.drop();
  });

  /** `atrium serve --role api` with Redis, and a subscriber that then stops reading its socket. */
  async function serveWithFrozenSubscriber(): Promise<{ served: Served; socket: WebSocket }> {
    served = await serve(
      { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, SHUTDOWN_DELAY_MS: '0' },
      { roles: 'api' },
    );
    socket = new WebSocket(`${served.url!.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const ws = socket;
    ws.on('error', () => undefined);
    await rawSubscription(ws, key, { query: SUBSCRIPTION, variables: { postId } });
    const output = served.stderr;
    await until(() => output().includes('"operationType":"subscription"'), 'the subscription to start');
    // Stops reading: the server's close frame is never read, so never answered.
    ws.pause();
    return { served, socket: ws };
  }

  it(
    'cuts the subscriber after the grace period, finishes the drain and exits 0',
    { timeout: 60_000 },
    async () => {
      const { served, socket } = await serveWithFrozenSubscriber();
      const exited = new Promise<number | null>((resolve) =>
        served.child.once('exit', (code) => resolve(code)),
      );
      const started = Date.now();
      served.child.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), DRAIN_BOUND_MS)),
      ]);
      expect(code, served.stderr()).toBe(0);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(WS_CLOSE_GRACE_MS - 500);
      expect(took).toBeLessThan(DRAIN_BOUND_MS);
      expect(served.stderr()).toContain(
        'WebSockets still open after the close grace period; terminating them',
      );
      expect(served.stderr()).toContain('"msg":"stopped"');
      expect(served.stderr()).not.toContain('drain took too long');
      // Read again, the socket finds the server's 1001 close frame, and the connection already gone.
      const closed = new Promise<number>((resolve) => socket.once('close', (c) => resolve(c)));
      socket.resume();
      expect(await closed).toBe(1001);
    },
  );

  it('exits 1 at once on a second SIGTERM during the drain', { timeout: 60_000 }, async () => {
    const { served } = await serveWithFrozenSubscriber();
    const exited = new Promise<number | null>((resolve) =>
      served.child.once('exit', (code) => resolve(code)),
    );
    served.child.kill('SIGTERM');
    await until(() => served.stderr().includes('"msg":"draining"'), 'the drain to start');
    // Inside the WebSocket grace period: the drain is still waiting on the frozen subscriber.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const started = Date.now();
    served.child.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 3_000)),
    ]);
    expect(code, served.stderr()).toBe(1);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(served.stderr()).toContain('second signal while draining; exiting now');
    expect(served.stderr()).not.toContain('"msg":"stopped"');
  });
});
