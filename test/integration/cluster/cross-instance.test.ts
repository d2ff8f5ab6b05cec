import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { issueOperatorTokens } from '../../../src/oauth/cli.js';
import { unary, userServiceClient } from '../grpc/support.js';
import { missingPrerequisite, OwnRedis, startTestCluster, type TestCluster } from './support.js';

/**
 * The deployment layout run for real: separate `atrium serve --role` processes behind a private
 * nginx, on one PostgreSQL database and one Redis (a redis-server of this file's own, so it can be
 * stopped). Every rule here is checked with independent HTTP clients talking to different
 * instances, not through one process's memory.
 */
const skip = await missingPrerequisite();

describe.skipIf(skip !== undefined)('the cluster: what holds across instances', { timeout: 120_000 }, () => {
  let redis: OwnRedis;
  let env: TestCluster;
  let api1: string;
  let api2: string;
  let auth1: string;
  let auth2: string;
  let product: string;

  beforeAll(async () => {
    redis = await OwnRedis.start();
    env = await startTestCluster({ layout: { api: 2, auth: 2, grpc: 1, worker: 0 }, redisUrl: redis.url });
    [api1, api2] = env.cluster.role('api').map((p) => p.url) as [string, string];
    [auth1, auth2] = env.cluster.role('auth').map((p) => p.url) as [string, string];
    product = (await env.services.core.products.create({ name: 'Widget', priceCents: 1250 })).id;
  }, 300_000);

  afterAll(async () => {
    await env?.stop();
    await redis?.stop();
  }, 60_000);

  async function caller(tier: 'free' | 'enterprise', role: 'member' | 'admin' = 'member') {
    const handle = `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const user = await env.services.core.users.create({
      handle,
      email: `${handle}@example.com`,
      name: `Cluster ${handle}`,
      role,
    });
    const key = await env.services.apiKeys.create({ userId: user.id, tier });
    return { userId: user.id, headers: { 'x-api-key': key.key } };
  }

  type Json = Record<string, unknown>;
  const json = async (res: Response) => (await res.json()) as Json;

  const orderBody = () => ({
    items: [{ product_id: product, quantity: 1 }],
    currency: 'USD',
    shipping_address: {
      name: 'Ada Lovelace',
      street: '1 Way',
      city: 'London',
      postal_code: 'SW1',
      country: 'GB',
    },
  });

  it('counts a free-tier key’s 100 requests across both api instances, then refuses on each', async () => {
    const { userId, headers } = await caller('free');
    const remaining: number[] = [];
    for (let i = 0; i < 50; i++) {
      const [a, b] = await Promise.all([
        fetch(`${api1}/v1/users/${userId}`, { headers }),
        fetch(`${api2}/v1/users/${userId}`, { headers }),
      ]);
      for (const res of [a, b]) {
        expect(res.status).toBe(200);
        remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
      }
    }
    // One shared window: every remaining count from 99 down to 0 was handed out exactly once.
    expect(remaining.sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    for (const base of [api1, api2, env.cluster.httpUrl]) {
      const res = await fetch(`${base}/v1/users/${userId}`, { headers });
      expect(res.status).toBe(429);
      expect((await json(res)).error).toBe('rate_limit_exceeded');
    }
  });

  it('serves a changed user fresh from every instance, whichever surface changed it', async () => {
    const { userId } = await caller('enterprise');
    const admin = await caller('enterprise', 'admin');
    const read = async (base: string) => {
      const res = await fetch(`${base}/v1/users/${userId}`, { headers: admin.headers });
      expect(res.status).toBe(200);
      return { name: (await json(res)).name as string, cache: res.headers.get('x-cache') };
    };
    await read(api1);
    expect(await read(api2)).toMatchObject({ cache: 'HIT' }); // one cache, filled by api-1

    // Through REST on api-2: api-1 must not answer the old name.
    const patched = await fetch(`${api2}/v1/users/${userId}`, {
      method: 'PATCH',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Renamed Through Api Two' }),
    });
    expect(patched.status).toBe(200);
    expect(await read(api1)).toMatchObject({ name: 'Renamed Through Api Two' });
    expect(await read(api2)).toMatchObject({ name: 'Renamed Through Api Two', cache: 'HIT' });

    // Through another process entirely (the core, as the CLI would): both see it.
    await env.services.core.users.update(SYSTEM_ACTOR, userId, { name: 'Renamed Elsewhere' });
    expect(await read(api1)).toMatchObject({ name: 'Renamed Elsewhere' });
    expect(await read(api2)).toMatchObject({ name: 'Renamed Elsewhere' });

    // Through the grpc process, reached through nginx: REST on both instances and GraphQL see it.
    expect(await read(api1)).toMatchObject({ cache: 'HIT' });
    const client = userServiceClient(env.cluster.grpcAddress);
    try {
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: userId, name: 'Renamed Through Grpc', update_mask: { paths: ['name'] } },
        admin.headers,
      );
      expect(error).toBeNull();
    } finally {
      client.close();
    }
    expect(await read(api2)).toMatchObject({ name: 'Renamed Through Grpc', cache: 'MISS' });
    expect(await read(api1)).toMatchObject({ name: 'Renamed Through Grpc', cache: 'HIT' });
    const graphql = await fetch(`${api1}/graphql`, {
      method: 'POST',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'query($id: ID!) { user(id: $id) { firstName lastName } }',
        variables: { id: userId },
      }),
    });
    expect(await json(graphql)).toEqual({
      data: { user: { firstName: 'Renamed', lastName: 'Through Grpc' } },
    });
  });

  it('creates one order when the same Idempotency-Key reaches both api instances at once', async () => {
    const { userId, headers } = await caller('enterprise');
    for (let round = 0; round < 5; round++) {
      const key = `cluster-${round}-${Math.random().toString(36).slice(2)}`;
      const send = (base: string) =>
        fetch(`${base}/api/v2/orders`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(orderBody()),
        });
      const answers = await Promise.all([send(api1), send(api2)]);
      const bodies = await Promise.all(answers.map(json));
      const created = answers.map((r, i) => ({ status: r.status, body: bodies[i]! }));
      // The loser either replays the stored answer or is told the first is still running.
      for (const c of created) {
        if (c.status === 201) continue;
        expect(c).toMatchObject({ status: 409, body: { error: 'idempotency_in_progress' } });
      }
      const winners = created.filter((c) => c.status === 201).map((c) => c.body.id as string);
      expect(winners.length).toBeGreaterThanOrEqual(1);
      expect(new Set(winners).size).toBe(1);
      // A later retry on either instance replays that one order.
      const replay = await send(api2);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect((await json(replay)).id).toBe(winners[0]);
    }
    const orders = await env.services.store.db
      .selectFrom('orders')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('owner_id', '=', userId)
      .executeTakeFirstOrThrow();
    expect(Number(orders.n)).toBe(5);
  });

  it('gives exactly one success when one refresh token is used on two auth instances at once', async () => {
    const { userId } = await caller('enterprise');
    const { client_id: clientId } = await env.services.oauth.clients.create({
      name: 'cluster test app',
      redirectUris: ['https://app.example.com/cb'],
      scopes: 'users:read',
      public: true,
    });
    for (let round = 0; round < 5; round++) {
      const tokens = await issueOperatorTokens(env.services, {
        userId,
        scopes: 'users:read',
        clientId,
      });
      const send = (base: string) =>
        fetch(`${base}/oauth/token/refresh`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            refresh_token: tokens.refresh_token,
            client_id: clientId,
          }),
        });
      const answers = await Promise.all([send(auth1), send(auth2)]);
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      const loser = answers.find((r) => r.status !== 200)!;
      expect((await json(loser)).error).toBe('invalid_grant');
    }
  });

  it('sees the client nginx saw (TRUST_PROXY=1): per-address login limits count it, forged X-Forwarded-For or not', async () => {
    const attempt = (from: string, forged: string) =>
      new Promise<{ status: number; error: string }>((resolve, reject) => {
        const target = new URL(`${env.cluster.httpUrl}/oauth/token`);
        const body = 'grant_type=client_credentials';
        const req = request(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: 'POST',
            localAddress: from,
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              'content-length': Buffer.byteLength(body),
              authorization: `Basic ${Buffer.from(`cl_nobody${Math.random().toString(36).slice(2)}:wrong`).toString('base64')}`,
              'x-forwarded-for': forged,
            },
          },
          (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, error: (JSON.parse(text) as { error: string }).error }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    // 30 failed client logins from 127.0.0.2, each naming another client and forging another
    // address, spread by nginx over both auth instances: one shared per-address budget.
    for (let i = 0; i < 30; i++) {
      expect(await attempt('127.0.0.2', `203.0.113.${i + 1}`)).toEqual({
        status: 401,
        error: 'invalid_client',
      });
    }
    expect(await attempt('127.0.0.2', '198.51.100.7')).toMatchObject({
      status: 429,
      error: 'rate_limit_exceeded',
    });
    // Another client address behind the same nginx is not punished for it.
    expect(await attempt('127.0.0.3', '127.0.0.2')).toEqual({ status: 401, error: 'invalid_client' });
  });

  it('delivers a comment added through api-1 to GraphQL subscribers on api-2 and through nginx (WebSocket and SSE)', async () => {
    const { userId, headers } = await caller('enterprise');
    const post = await env.services.core.posts.create(SYSTEM_ACTOR, {
      title: 'Cluster post',
      body: 'Watched from another instance',
      authorId: userId,
    });
    const subscription = `subscription ($postId: ID!) { commentAdded(postId: $postId) { id body post { id } } }`;
    const key = headers['x-api-key'];
    const ws = (base: string) =>
      createWsClient({
        url: `${base.replace(/^http/, 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { 'x-api-key': key },
        retryAttempts: 0,
      });
    const sse = (base: string) =>
      createSseClient({ url: `${base}/graphql/stream`, headers: { 'x-api-key': key }, retryAttempts: 0 });
    const subscribers = {
      'ws api-2': ws(api2),
      'sse api-2': sse(api2),
      'ws nginx': ws(env.cluster.httpUrl),
      'sse nginx': sse(env.cluster.httpUrl),
    };
    const received = new Map<string, Array<{ id: string; body: string; postId: string }>>();
    const unsubscribe: Array<() => void> = [];
    for (const [name, client] of Object.entries(subscribers)) {
      received.set(name, []);
      unsubscribe.push(
        client.subscribe<{ commentAdded: { id: string; body: string; post: { id: string } } }>(
          { query: subscription, variables: { postId: post.id } },
          {
            next: (r) => {
              const c = r.data?.commentAdded;
              if (c) received.get(name)!.push({ id: c.id, body: c.body, postId: c.post.id });
            },
            error: (err) => received.get(name)!.push({ id: 'error', body: String(err), postId: '' }),
            complete: () => undefined,
          },
        ),
      );
    }
    try {
      // Subscriptions become live asynchronously; comment once a second until every subscriber
      // has heard one. Delivery is at most once, so each comment is heard once or not at all.
      const sent = new Map<string, string>();
      const deadline = Date.now() + 20_000;
      while ([...received.values()].some((list) => list.length === 0)) {
        if (Date.now() > deadline)
          throw new Error(`not every subscriber heard a comment: ${JSON.stringify([...received])}`);
        const body = `comment ${sent.size + 1} through api-1`;
        const res = await fetch(`${api1}/graphql`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({
            query: `mutation ($input: AddCommentInput!) { addComment(input: $input) { comment { id } errors { message } } }`,
            variables: { input: { body, authorId: userId, postId: post.id } },
          }),
        });
        const json = (await res.json()) as { data: { addComment: { comment: { id: string } } } };
        expect(res.status).toBe(200);
        sent.set(json.data.addComment.comment.id, body);
        await new Promise((r) => setTimeout(r, 1000));
      }
      for (const [name, list] of received) {
        expect(list.length, name).toBeGreaterThan(0);
        expect(new Set(list.map((c) => c.id)).size, `${name}: no duplicates`).toBe(list.length);
        for (const c of list)
          expect({ name, body: c.body, postId: c.postId }).toEqual({
            name,
            body: sent.get(c.id),
            postId: post.id,
          });
      }
    } finally {
      for (const u of unsubscribe) u();
      await Promise.all(Object.values(subscribers).map((c) => c.dispose()));
    }
  });

  it('runs a persisted query registered on api-1 by its hash on api-2 and through nginx', async () => {
    const { headers } = await caller('enterprise');
    const query = `query ClusterPosts { posts(first: 1) { edges { node { id } } } }`;
    const sha256Hash = createHash('sha256').update(query).digest('hex');
    const extensions = { persistedQuery: { version: 1, sha256Hash } };
    const send = (base: string, body: unknown) =>
      fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));
    // Unknown everywhere at first.
    expect((await send(api2, { extensions })).body).toMatchObject({
      errors: [{ extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } }],
    });
    const registered = await send(api1, { query, extensions });
    expect(registered.status).toBe(200);
    expect(registered.body.errors).toBeUndefined();
    for (const base of [api2, env.cluster.httpUrl]) {
      const byHash = await send(base, { extensions });
      expect(byHash.status).toBe(200);
      expect(byHash.body).toEqual(registered.body);
    }
  });

  it('keeps answering without Redis: limits fail open with a metric and one log line, then recover', async () => {
    const { userId, headers } = await caller('enterprise');
    const url = (base: string) => `${base}/v1/users/${userId}`;
    expect((await fetch(url(env.cluster.httpUrl), { headers })).headers.get('x-ratelimit-limit')).toBe(
      '100000',
    );
    await redis.stop();
    const during: number[] = [];
    const started = Date.now();
    while (Date.now() - started < 3000) {
      const answers = await Promise.all(
        [api1, api2, env.cluster.httpUrl].map((b) => fetch(url(b), { headers })),
      );
      for (const res of answers) {
        during.push(res.status);
        expect(res.headers.get('x-ratelimit-limit')).toBeNull(); // not limited, and not pretending
      }
    }
    expect(new Set(during)).toEqual(new Set([200]));
    // Readiness says so (the decision: Redis is a dependency of api), while requests are served.
    expect((await fetch(`${api1}/readyz`)).status).toBe(503);
    const metrics = await (await fetch(`${api1}/metrics`)).text();
    expect(metrics).toMatch(/atrium_redis_up 0/);
    expect(metrics).toMatch(/atrium_shared_state_degraded_total\{component="rate_limiter"\} [1-9]/);

    await redis.resume();
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${api1}/readyz`)).status !== 200 || (await fetch(`${api2}/readyz`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('api instances did not become ready after Redis returned');
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const base of [api1, api2]) {
      const res = await fetch(url(base), { headers });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBe('100000');
    }
    const log = readFileSync(join(env.cluster.runDir, 'logs', 'api-1.log'), 'utf8');
    expect(log.match(/Redis unavailable: rate limits fail open/g)).toHaveLength(1);
    expect(log).toMatch(/Redis is back/);
  });
});
