import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { freePort } from '../../helpers/ports.js';
import { until } from '../../helpers/wait.js';
import { NGINX, ON_CI } from '../cluster/support.js';

/**
 * The server's pings through a real nginx (docs/deployment.md, "GraphQL subscriptions"): nginx's
 * proxy_read_timeout counts from the last thing the instance sent, and a ping is sent, so an idle
 * subscription outlives the timeout when the ping interval is shorter, and is closed (1006) at the
 * timeout when it is longer. The shipped config has 1 h against 12 s; here 3 s against 1 s and 12 s.
 */
const READ_TIMEOUT_S = 3;
const SUBSCRIPTION = 'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id } }';

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!NGINX && !ON_CI)('graphql-ws pings through nginx', () => {
  let atrium: TestAtrium | undefined;
  let nginx: ChildProcess | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    nginx?.kill('SIGTERM');
    if (nginx && nginx.exitCode === null) await new Promise((resolve) => nginx!.once('exit', resolve));
    await atrium?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    [atrium, nginx, dir] = [undefined, undefined, undefined];
  });

  /** An Atrium pinging every `keepAliveMs`, behind an nginx that proxies /graphql with a 3 s read timeout. */
  async function behindNginx(keepAliveMs: number): Promise<{ atrium: TestAtrium; url: string }> {
    atrium = await startTestAtrium({}, undefined, { wsKeepAliveMs: keepAliveMs });
    const { httpUrl } = await atrium.listen();
    const port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'atrium-ws-nginx-'));
    writeFileSync(
      join(dir, 'nginx.conf'),
      `daemon off; pid ${dir}/nginx.pid; error_log ${dir}/error.log info;
events {}
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  server {
    listen 127.0.0.1:${port};
    location /graphql {
      proxy_pass ${httpUrl};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout ${READ_TIMEOUT_S}s;
      proxy_send_timeout ${READ_TIMEOUT_S}s;
    }
  }
}
`,
    );
    const started = spawn(NGINX!, ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' });
    nginx = started;
    const logDir = dir;
    await until(async () => {
      if (started.exitCode !== null)
        throw new Error(
          `nginx exited ${started.exitCode}: ${readFileSync(join(logDir, 'error.log'), 'utf8')}`,
        );
      return fetch(`http://127.0.0.1:${port}/graphql`).then(
        () => true,
        () => false,
      );
    }, 'nginx to listen');
    return { atrium, url: `ws://127.0.0.1:${port}/graphql` };
  }

  /** An idle commentAdded subscription through nginx, left alone for `idleMs`. */
  async function idleSubscription(keepAliveMs: number, idleMs: number) {
    const { atrium, url } = await behindNginx(keepAliveMs);
    const caller = await atrium.caller();
    const member = { id: caller.userId, kind: 'user' as const, role: 'member' as const };
    const post = await atrium.services.core.posts.create(member, {
      title: 't',
      body: 'b',
      authorId: caller.userId,
    });
    const started = Date.now();
    let closed: { code: number; afterMs: number } | undefined;
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      connectionParams: { 'x-api-key': caller.key },
      retryAttempts: 0,
      on: {
        closed: (e) => (closed ??= { code: (e as { code: number }).code, afterMs: Date.now() - started }),
      },
    });
    const events: unknown[] = [];
    client.subscribe(
      { query: SUBSCRIPTION, variables: { postId: post.id } },
      { next: (v) => events.push(v), error: () => undefined, complete: () => undefined },
    );
    await settle(idleMs);
    const comment = async () =>
      atrium.services.core.comments.add(member, { body: 'late', authorId: caller.userId, postId: post.id });
    return { closed: () => closed, events, comment, dispose: () => client.dispose() };
  }

  it(
    'an idle subscription pinged every 1 s outlives a 3 s read timeout, and still delivers',
    { timeout: 30_000 },
    async () => {
      const sub = await idleSubscription(1_000, READ_TIMEOUT_S * 3_000 + 1_000);
      try {
        expect(sub.closed()).toBeUndefined();
        const { id } = await sub.comment();
        await until(() => sub.events.length > 0, 'the comment through nginx');
        expect(sub.events).toEqual([{ data: { commentAdded: { id } } }]);
      } finally {
        await sub.dispose();
      }
    },
  );

  it(
    'pinged every 12 s, the same subscription is closed by nginx at the 3 s read timeout',
    { timeout: 30_000 },
    async () => {
      const sub = await idleSubscription(12_000, READ_TIMEOUT_S * 1_000 + 2_000);
      try {
        expect(sub.closed()).toEqual({ code: 1006, afterMs: expect.any(Number) });
        expect(sub.closed()!.afterMs).toBeGreaterThanOrEqual(READ_TIMEOUT_S * 1_000 - 200);
        expect(sub.closed()!.afterMs).toBeLessThan(READ_TIMEOUT_S * 1_000 + 1_500);
      } finally {
        await sub.dispose();
      }
    },
  );
});
