import { beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/graphql/pipeline/persisted.js';
import type { TestAtrium } from '../../helpers/atrium.js';
import { type Answer, codesOf, runOver, TRANSPORTS } from './transports.js';
import { SUBSCRIPTION_BY_GET_MESSAGE } from '../../../src/graphql/pipeline/get-queries-only.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * One error shape whatever runs the operation and whatever carries it: a bad variable is refused
 * with the same words, `extensions.code` and HTTP status whether graphql-jit (queries) or Yoga's
 * executor (mutations, introspection, subscriptions) would have run it.
 */

const BAD = { a: 1 };
const OPERATIONS = {
  'query (graphql-jit)': 'query($id: ID!) { user(id: $id) { id } }',
  'mutation (graphql-js)': 'mutation($id: ID!) { deletePost(id: $id) { deletedPostId } }',
  'introspection (graphql-js)': 'query($id: String!) { __type(name: $id) { name } }',
};
const WORDS = 'Variable "$id" got invalid value { a: 1 }';

describe('a bad variable is refused alike on every execution path and transport', () => {
  const server = listeningAtrium();
  let caller: Awaited<ReturnType<TestAtrium['caller']>>;

  beforeAll(async () => {
    caller = await server.atrium.caller({ handle: 'errorshapes' });
  });

  describe.each(Object.entries(OPERATIONS))('%s', (_name, query) => {
    it.each(['application/graphql-response+json', 'application/json'])(
      'POST (accept %s): 400, no data, BAD_USER_INPUT',
      async (accept) => {
        const res = await fetch(`${server.base}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept, ...caller.headers },
          body: JSON.stringify({ query, variables: { id: BAD } }),
        });
        const body = (await res.json()) as Answer;
        expect(res.status).toBe(400);
        expect(body.data).toBeUndefined();
        expect(body.errors).toHaveLength(1);
        expect(body.errors![0]!.message).toContain(WORDS);
        expect(body.errors![0]!.extensions).toEqual({ code: 'BAD_USER_INPUT' });
      },
    );

    it.each(TRANSPORTS)('%s: no data, BAD_USER_INPUT in the same words', async (transport) => {
      if (transport === 'GET' && query.startsWith('mutation')) return; // GET runs no mutation (405)
      const a = await runOver(transport, server.base, { query, variables: { id: BAD } }, caller.headers);
      if (transport === 'POST' || transport === 'GET') expect(a.status).toBe(400);
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['BAD_USER_INPUT']);
      expect(a.errors![0]!.message).toContain(WORDS);
    });
  });

  it.each(['WS', 'SSE'] as const)(
    '%s: a subscription says it in the same words and code',
    async (transport) => {
      const query = 'subscription($id: ID!) { commentAdded(postId: $id) { id } }';
      const a = await runOver(transport, server.base, { query, variables: { id: BAD } }, caller.headers);
      expect(a.data).toBeUndefined();
      expect(codesOf(a)).toEqual(['BAD_USER_INPUT']);
      expect(a.errors![0]!.message).toContain(WORDS);
    },
  );
});

describe('errors over WebSocket and SSE have the shape they have over HTTP', () => {
  const server = listeningAtrium();

  const unknownHash = (t: string) => ({
    persistedQuery: { version: 1, sha256Hash: sha256Hex(`{ unknown${t}: __typename }`) },
  });

  it.each(TRANSPORTS)('%s: { message, extensions: { code } } only, no extensions.http', async (transport) => {
    const cases: Array<[Parameters<typeof runOver>[2], string]> = [
      [{ query: '{ nope }' }, 'GRAPHQL_VALIDATION_FAILED'],
      [{ query: '{ me { id ' }, 'GRAPHQL_PARSE_FAILED'],
      [{ extensions: unknownHash(transport) }, 'PERSISTED_QUERY_NOT_FOUND'],
      [{ query: 'query($id: ID!) { user(id: $id) { id } }', variables: { id: BAD } }, 'BAD_USER_INPUT'],
    ];
    for (const [op, code] of cases) {
      const a = await runOver(transport, server.base, op);
      expect(a.data, code).toBeUndefined();
      expect(
        a.errors!.map((e) => e.extensions),
        code,
      ).toEqual([{ code }]);
    }
  });

  it('SSE: malformed JSON is 400 BAD_REQUEST in the words POST uses', async () => {
    const res = await fetch(`${server.base}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: '{"query":',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      errors: [{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }],
    });
    const get = await fetch(
      `${server.base}/graphql/stream?query=${encodeURIComponent('{ __typename }')}&variables=%7B`,
      {
        headers: { accept: 'text/event-stream' },
      },
    );
    expect(get.status).toBe(400);
    expect(await get.json()).toEqual({
      errors: [
        { message: 'The variables parameter is not valid JSON.', extensions: { code: 'BAD_REQUEST' } },
      ],
    });
  });

  it('SSE: parameters of the wrong shape answer as POST /graphql does, code and words', async () => {
    const cases = [
      '{"variables":5,"query":"{ __typename }"}',
      '{"variables":{}}',
      '{"query":5}',
      '{"query":"{ __typename }","extensions":5}',
      '{"query":"{ __typename }","operationName":5}',
    ];
    for (const body of cases) {
      const post = (path: string, accept: string) =>
        fetch(`${server.base}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept },
          body,
        });
      const [viaPost, viaSse] = await Promise.all([
        post('/graphql', 'application/json'),
        post('/graphql/stream', 'text/event-stream'),
      ]);
      expect(viaSse.status, body).toBe(400);
      expect(await viaSse.json(), body).toEqual(await viaPost.json());
    }
  });

  it('SSE: a mutation over GET is 405 BAD_REQUEST, as on GET /graphql', async () => {
    const query = encodeURIComponent('mutation { deletePost(id: "pst_x") { deletedPostId } }');
    const res = await fetch(`${server.base}/graphql/stream?query=${query}`, {
      headers: { accept: 'text/event-stream' },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(await res.json()).toEqual({
      errors: [
        {
          message: 'Can only perform a mutation operation from a POST request.',
          extensions: { code: 'BAD_REQUEST' },
        },
      ],
    });
  });

  it.each(['text/event-stream', 'application/json', 'application/graphql-response+json'])(
    'GET /graphql: a subscription is 405 BAD_REQUEST (GET runs queries only), under Accept %s',
    async (accept) => {
      const { postId, key } = await authorWithPost(server.atrium, `subget${accept.length}`, 'Sub by GET');
      const query = encodeURIComponent(`subscription { commentAdded(postId: "${postId}") { id } }`);
      const res = await fetch(`${server.base}/graphql?query=${query}`, {
        headers: { accept, 'x-api-key': key },
        signal: AbortSignal.timeout(5_000),
      });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      const refusal = {
        errors: [{ message: SUBSCRIPTION_BY_GET_MESSAGE, extensions: { code: 'BAD_REQUEST' } }],
      };
      if (accept === 'text/event-stream') {
        // As Yoga answers a mutation by GET under this Accept: the refusal as the stream's one event.
        expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        expect(await res.text()).toBe(
          `:\n\nevent: next\ndata: ${JSON.stringify(refusal)}\n\nevent: complete\ndata:\n\n`,
        );
      } else {
        expect(await res.json()).toEqual(refusal);
      }
    },
  );

  it('GET /graphql/stream still serves a subscription (graphql-sse, a separate endpoint)', async () => {
    const { postId, key } = await authorWithPost(server.atrium, 'subgetstream', 'Sub by GET stream');
    const query = encodeURIComponent(`subscription { commentAdded(postId: "${postId}") { id } }`);
    const controller = new AbortController();
    const res = await fetch(`${server.base}/graphql/stream?query=${query}`, {
      headers: { accept: 'text/event-stream', 'x-api-key': key },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    controller.abort();
  });

  it.each(['POST', 'GET', 'SSE'] as const)(
    '%s: a refused bearer token is 401 with WWW-Authenticate',
    async (t) => {
      const query = encodeURIComponent('{ me { id } }');
      const headers = { authorization: 'Bearer abc.def.ghi', accept: 'application/json' };
      const res =
        t === 'POST'
          ? await fetch(`${server.base}/graphql`, {
              method: 'POST',
              headers: { ...headers, 'content-type': 'application/json' },
              body: JSON.stringify({ query: '{ me { id } }' }),
            })
          : await fetch(`${server.base}/graphql${t === 'SSE' ? '/stream' : ''}?query=${query}`, {
              headers: t === 'SSE' ? { ...headers, accept: 'text/event-stream' } : headers,
            });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(
        /^Bearer error="invalid_token", error_description="/,
      );
      const body = (await res.json()) as Answer;
      expect(body.errors!.map((e) => e.extensions)).toEqual([{ code: 'UNAUTHENTICATED' }]);
    },
  );
});

describe('production refusals over WebSocket and SSE carry no extensions.http', () => {
  const server = listeningAtrium({ NODE_ENV: 'production', LOG_LEVEL: 'fatal' });

  it.each(['WS', 'SSE'] as const)('%s: PERSISTED_QUERY_REQUIRED', async (transport) => {
    const a = await runOver(transport, server.base, { query: '{ __typename }' });
    expect(a.errors!.map((e) => e.extensions)).toEqual([{ code: 'PERSISTED_QUERY_REQUIRED' }]);
  });
});
