import { request as httpRequest } from 'node:http';
import { createClient as createSseClient } from 'graphql-sse';
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import type { TestAtrium } from '../../helpers/atrium.js';
import { withAlteredSignature } from '../oauth/forge.js';
import { type Answer, codesOf, runOver, TRANSPORTS, type TransportName, wsClient } from './transports.js';
import { authorWithPost, listeningAtrium, productionAtrium } from './support.js';

/**
 * The rules and bad inputs of issue 7 that pipeline-rules.test.ts and pipeline-persisted.test.ts do
 * not already walk on every transport: anonymous and bearer callers, introspection outside
 * production, unknown hashes, malformed JSON and oversized bodies as each transport carries them,
 * one budget per caller across transports (anonymous callers per address), and the rules applied to
 * subscriptions over WebSocket and SSE, and the limits and budget through known hashes in production.
 */

const persisted = (query: string) => ({ persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } });

/** Costs 232 points: posts → edges → node → comments → edges → node → id. */
const DEEP_LIST = 'posts(first: 1) { edges { node { comments(first: 1) { edges { node { id } } } } } }';
/** 928 points: ten fit in a budget of 10,000, the eleventh does not. */
const COSTS_928 = `query Heavy { ${Array.from({ length: 4 }, (_, i) => `a${i}: ${DEEP_LIST}`).join(' ')} }`;
/** 1 + 23 × n points, 5 levels deep: each alias is post → comments → edges (a list) → node → id. */
const subscriptionCosting = (n: number) =>
  `subscription Costly($postId: ID!) { commentAdded(postId: $postId) { ${Array.from(
    { length: n },
    (_, i) => `a${i}: post { comments(first: 1) { edges { node { id } } } }`,
  ).join(' ')} } }`;
const SUBSCRIPTION = 'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body } }';

type Delivery = { data?: { commentAdded?: { id: string; body: string } }; errors?: Answer['errors'] };

/** A subscription over graphql-ws or graphql-sse: resolves with the first thing that arrives. */
function firstEvent(
  transport: 'WS' | 'SSE',
  base: string,
  payload: Record<string, unknown>,
  headers: Record<string, string> = {},
): { first: Promise<Delivery & { status?: number }>; stop(): Promise<void> } {
  let stop: () => Promise<void>;
  const first = new Promise<Delivery & { status?: number }>((resolve) => {
    const sink = {
      next: (value: Delivery) => resolve(value),
      error: async (err: unknown) => {
        if (Array.isArray(err)) return resolve({ errors: err as Answer['errors'] });
        const response = (err as { response?: Response }).response;
        if (response) {
          const text = await response.text().catch(() => '');
          return resolve({ status: response.status, ...(text ? (JSON.parse(text) as object) : {}) });
        }
        resolve({ errors: [{ message: String(err) }] });
      },
      complete: () => undefined,
    };
    if (transport === 'WS') {
      const client = wsClient(base, headers);
      const off = client.subscribe({ query: '', ...payload } as never, sink as never);
      stop = async () => {
        off();
        await client.dispose();
      };
    } else {
      const client = createSseClient({ url: `${base}/graphql/stream`, headers, retryAttempts: 0 });
      const off = client.subscribe({ query: '', ...payload } as never, sink as never);
      stop = async () => {
        off();
        client.dispose();
      };
    }
  });
  return { first, stop: () => stop() };
}

/** A raw graphql-ws socket, for messages no client library would send. */
async function rawWs(base: string): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, closed };
}

/** POST /graphql from a given local address (127.0.0.0/8 is all loopback on Linux). */
function postFrom(base: string, localAddress: string, query: string): Promise<Answer> {
  const url = new URL(`${base}/graphql`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        localAddress,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ...(JSON.parse(text) as object) }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ query }));
  });
}

describe('issue 7 rules on every transport, development', () => {
  const server = listeningAtrium();
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;
  let token: string;
  let postId: string;

  beforeAll(async () => {
    ({ postId, ...caller } = await authorWithPost(server.atrium, 'transportrules', 'Watched'));
    token = (
      await server.atrium.services.oauth!.tokens.issue({
        subject: caller.userId,
        clientId: 'cli_transportrules',
        scope: ['profile:read', 'users:read', 'content:read'],
      })
    ).token;
  });

  describe.each(TRANSPORTS)('%s', (transport: TransportName) => {
    it('answers a protected operation without credentials with UNAUTHENTICATED', async () => {
      const a = await runOver(transport, server.base, { query: '{ me { id } }' });
      expect(a.data).toBeNull();
      expect(codesOf(a)).toEqual(['UNAUTHENTICATED']);
    });

    it('takes a bearer token as well as an API key', async () => {
      const a = await runOver(
        transport,
        server.base,
        { query: '{ me { handle } }' },
        { authorization: `Bearer ${token}` },
      );
      expect(a.errors).toBeUndefined();
      expect(a.data).toEqual({ me: { handle: 'transportrules' } });
    });

    it('refuses a bearer token that is not valid', async () => {
      const a = await runOver(
        transport,
        server.base,
        { query: '{ me { handle } }' },
        { authorization: `Bearer ${withAlteredSignature(token)}` },
      );
      if (transport === 'WS') expect(a.closeCode).toBe(4403);
      else {
        expect(a.status).toBe(401);
        expect(codesOf(a)).toEqual(['UNAUTHENTICATED']);
      }
    });

    it('serves introspection outside production', async () => {
      const a = await runOver(transport, server.base, { query: '{ __schema { queryType { name } } }' });
      expect(a.errors).toBeUndefined();
      expect(a.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    });

    it('answers an unknown hash with PERSISTED_QUERY_NOT_FOUND', async () => {
      const a = await runOver(transport, server.base, {
        extensions: persisted(`{ unknown${transport}: __typename }`),
      });
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    });
  });

  describe.each(['WS', 'SSE'] as const)('subscriptions over %s', (transport) => {
    it('refuses a subscription nested deeper than 7 levels at validation', async () => {
      const deep =
        'subscription Deep($postId: ID!) { commentAdded(postId: $postId) { post { author { posts { edges { node { author { posts { edges { node { id } } } } } } } } } } }';
      const sub = firstEvent(transport, server.base, { query: deep, variables: { postId } }, caller.headers);
      const event = await sub.first;
      await sub.stop();
      expect(event.data).toBeUndefined();
      expect(codesOf(event as Answer)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(event.errors![0]!.message).toMatch(/^The query nests \d+ levels deep; at most 7 are allowed\.$/);
    });

    it('refuses a subscription costing more than 1,000 points at validation', async () => {
      const costly = subscriptionCosting(50);
      const sub = firstEvent(
        transport,
        server.base,
        { query: costly, variables: { postId } },
        caller.headers,
      );
      const event = await sub.first;
      await sub.stop();
      expect(event.data).toBeUndefined();
      expect(event.errors![0]!.message).toBe('The query costs 1151 points; at most 1000 are allowed.');
    });
  });

  describe('malformed JSON, as each transport carries it', () => {
    // A JSON parsing failure is 400 whatever the client accepts, as for a malformed POST body.
    it.each(['application/graphql-response+json', 'application/json'])(
      'GET: malformed variables or extensions (accept %s) are a 400 BAD_REQUEST',
      async (accept) => {
        for (const param of ['variables', 'extensions']) {
          const url = new URL(`${server.base}/graphql`);
          url.searchParams.set('query', '{ __typename }');
          url.searchParams.set(param, '{"id": ');
          const res = await fetch(url, { headers: { accept } });
          const body = (await res.json()) as Answer;
          expect({ param, status: res.status, body }).toEqual({
            param,
            status: 400,
            body: {
              errors: [
                { message: `The ${param} parameter is not valid JSON.`, extensions: { code: 'BAD_REQUEST' } },
              ],
            },
          });
        }
      },
    );

    it('SSE: a malformed body is refused before any stream opens', async () => {
      const res = await fetch(`${server.base}/graphql/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: '{"query": "{ __typename }", ',
      });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).not.toMatch(/event-stream/);
      await res.body?.cancel();
    });

    it('WS: a message that is not JSON closes the socket with 4400', async () => {
      const { ws, closed } = await rawWs(server.base);
      ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
      ws.send('{"type": "subscribe", ');
      expect(await closed).toBe(4400);
    });
  });

  describe('bodies over 1 MiB', () => {
    const huge = JSON.stringify({ query: `{ __typename } # ${'x'.repeat(1024 * 1024)}` });

    it('SSE: 413', async () => {
      const res = await fetch(`${server.base}/graphql/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: huge,
      });
      expect(res.status).toBe(413);
      await res.body?.cancel();
    });

    it('WS: the socket is closed with 1009 (message too big)', async () => {
      const { ws, closed } = await rawWs(server.base);
      ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: JSON.parse(huge) }));
      expect(await closed).toBe(1009);
    });
  });
});

/** A mutation whose selection nests 10 levels: refused at validation, so createPost never runs. */
const DEEP_MUTATION = `mutation Deep($in: CreatePostInput!) { createPost(input: $in) { post { author { posts {
  edges { node { author { posts { edges { node { id } } } } } } } } } } }`;
const CHEAP_MUTATION =
  'mutation Cheap($in: CreatePostInput!) { createPost(input: $in) { post { id } errors { field } } }';

describe('a refused mutation runs no resolver: nothing is written', () => {
  const server = listeningAtrium();

  const postsBy = async (userId: string) =>
    (
      await server.atrium.services.store.db
        .selectFrom('posts')
        .select('id')
        .where('author_id', '=', userId)
        .execute()
    ).length;

  // GET carries no mutation at all (405, tested in pipeline-persisted.test.ts).
  it.each(['POST', 'WS', 'SSE'] as const)('%s: too deep, then over budget', async (transport) => {
    const { userId, headers } = await server.atrium.caller({ handle: `writer${transport.toLowerCase()}` });
    const input = { in: { title: 'Never', body: 'b', authorId: userId } };
    const deep = await runOver(transport, server.base, { query: DEEP_MUTATION, variables: input }, headers);
    expect(codesOf(deep)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(await postsBy(userId)).toBe(0);

    for (let i = 0; i < 10; i++) {
      expect((await runOver(transport, server.base, { query: COSTS_928 }, headers)).errors).toBeUndefined();
    }
    // 720 points left: the cheap mutation (14 points) fits and writes; 696 more leave 10 of 10,000.
    const fits = await runOver(transport, server.base, { query: CHEAP_MUTATION, variables: input }, headers);
    expect(fits.errors).toBeUndefined();
    expect(await postsBy(userId)).toBe(1);
    const spend = `query Spend { ${Array.from({ length: 3 }, (_, i) => `a${i}: ${DEEP_LIST}`).join(' ')} }`;
    expect((await runOver(transport, server.base, { query: spend }, headers)).errors).toBeUndefined();
    const refused = await runOver(
      transport,
      server.base,
      { query: CHEAP_MUTATION, variables: input },
      headers,
    );
    expect(codesOf(refused)).toEqual(['RATE_LIMITED']);
    expect(await postsBy(userId)).toBe(1);
  });
});

describe('one complexity budget per caller, whatever the transport', () => {
  const server = listeningAtrium();
  let postId: string;
  beforeAll(async () => {
    ({ postId } = await authorWithPost(server.atrium, 'budgetauthor', 'Budget'));
  });

  it('spends from one budget over POST, GET, WebSocket and SSE; then refuses queries and subscriptions', async () => {
    const { key } = await server.atrium.caller({ handle: 'budgetmixed' });
    const credentials = { 'x-api-key': key };
    for (let i = 0; i < 10; i++) {
      const ok = await runOver(TRANSPORTS[i % 4]!, server.base, { query: COSTS_928 }, credentials);
      expect(ok.errors, `operation ${i + 1}`).toBeUndefined();
    }
    for (const transport of TRANSPORTS) {
      const refused = await runOver(transport, server.base, { query: COSTS_928 }, credentials);
      expect(codesOf(refused), transport).toEqual(['RATE_LIMITED']);
      expect(refused.errors![0]!.extensions!.retryAfter).toBe(60);
      // POST and GET answer 429; the budget is spent when the operation starts, after an SSE stream
      // has opened (200) and on an open socket, so there the refusal is the operation's one result.
      expect(refused.status, transport).toBe({ POST: 429, GET: 429, WS: 101, SSE: 200 }[transport]);
    }
    // 720 points left: a subscription of 921 points is refused as well.
    const heavySubscription = subscriptionCosting(40);
    for (const transport of ['WS', 'SSE'] as const) {
      const sub = firstEvent(
        transport,
        server.base,
        { query: heavySubscription, variables: { postId } },
        credentials,
      );
      const event = await sub.first;
      await sub.stop();
      expect(codesOf(event as Answer), transport).toEqual(['RATE_LIMITED']);
    }
  });

  it('counts anonymous callers per network address', async () => {
    const fromA = '127.0.0.1';
    const fromB = '127.0.0.2';
    for (let i = 0; i < 10; i++) {
      const ok = await postFrom(server.base, fromA, COSTS_928);
      expect(ok.errors, `operation ${i + 1}`).toBeUndefined();
    }
    // The same address over any transport is the same anonymous caller.
    for (const transport of TRANSPORTS) {
      const refused = await runOver(transport, server.base, { query: COSTS_928 });
      expect(codesOf(refused), transport).toEqual(['RATE_LIMITED']);
    }
    // Another address has a budget of its own.
    const other = await postFrom(server.base, fromB, COSTS_928);
    expect(other.errors).toBeUndefined();
    expect(other.data).toBeDefined();
  });
});

/** Too deep (8 levels) and too costly (1,160 points), for production's known hashes. */
const TOO_DEEP =
  'query TooDeep { posts { edges { node { author { posts { edges { node { author { id } } } } } } } } }';
const TOO_COSTLY = `query TooCostly { ${Array.from({ length: 5 }, (_, i) => `a${i}: ${DEEP_LIST}`).join(' ')} }`;

describe('production: known hashes pass the same limits, and subscriptions are persisted only', () => {
  const server = productionAtrium([SUBSCRIPTION, TOO_DEEP, TOO_COSTLY, COSTS_928]);
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;
  let postId: string;

  beforeAll(async () => {
    ({ postId, ...caller } = await authorWithPost(server.atrium, 'prodwatcher', 'Prod'));
  });

  it.each(TRANSPORTS)(
    '%s: refuses a known hash that is too deep or too costly, at validation',
    async (transport) => {
      const deep = await runOver(transport, server.base, { extensions: persisted(TOO_DEEP) }, caller.headers);
      expect(deep.data).toBeUndefined();
      expect(deep.errors![0]!.message).toBe('The query nests 8 levels deep; at most 7 are allowed.');
      const costly = await runOver(
        transport,
        server.base,
        { extensions: persisted(TOO_COSTLY) },
        caller.headers,
      );
      expect(costly.data).toBeUndefined();
      expect(costly.errors![0]!.message).toBe('The query costs 1160 points; at most 1000 are allowed.');
    },
  );

  it('spends one budget per caller through known hashes, over every transport', async () => {
    const { headers } = await server.atrium.caller({ handle: 'prodbudget' });
    for (let i = 0; i < 10; i++) {
      const ok = await runOver(
        TRANSPORTS[i % 4]!,
        server.base,
        { extensions: persisted(COSTS_928) },
        headers,
      );
      expect(ok.errors, `operation ${i + 1}`).toBeUndefined();
    }
    for (const transport of TRANSPORTS) {
      const refused = await runOver(transport, server.base, { extensions: persisted(COSTS_928) }, headers);
      expect(codesOf(refused), transport).toEqual(['RATE_LIMITED']);
    }
  });

  it.each(['WS', 'SSE'] as const)(
    '%s: a plain subscription document is PERSISTED_QUERY_REQUIRED',
    async (transport) => {
      const sub = firstEvent(
        transport,
        server.base,
        { query: SUBSCRIPTION, variables: { postId } },
        caller.headers,
      );
      const event = await sub.first;
      await sub.stop();
      expect(event.data).toBeUndefined();
      expect(codesOf(event as Answer)).toEqual(['PERSISTED_QUERY_REQUIRED']);
    },
  );

  it.each(['WS', 'SSE'] as const)(
    '%s: a known subscription hash is set up and delivers',
    async (transport) => {
      const sub = firstEvent(
        transport,
        server.base,
        { extensions: persisted(SUBSCRIPTION), variables: { postId } },
        caller.headers,
      );
      const actor = { id: caller.userId, kind: 'user' as const, role: 'member' as const };
      const body = `over ${transport}`;
      // The subscription is set up asynchronously: add comments until one arrives.
      let event: Delivery | undefined;
      for (let i = 0; i < 50 && !event; i++) {
        await server.atrium.services.core.comments.add(actor, { body, authorId: caller.userId, postId });
        event = await Promise.race([sub.first, new Promise<undefined>((r) => setTimeout(r, 100))]);
      }
      await sub.stop();
      expect(event?.errors).toBeUndefined();
      expect(event?.data?.commentAdded?.body).toBe(body);
    },
  );
});
