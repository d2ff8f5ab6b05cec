import { beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * The common JSON POST is answered without Yoga's Fetch layer (src/graphql/transports/direct-post.ts).
 * It must answer exactly as Yoga does. Each request here is sent twice over a real socket: once as
 * the direct path takes it, once with an Accept value it leaves to Yoga that Yoga negotiates to the
 * same media type. Status, content type and body must be the same, and the operation's debug line
 * must say which path answered, so a direct path that silently stopped answering fails here too.
 */

/** [Accept the direct path takes, the same media type spelled so that only Yoga answers it]. */
const PAIRS = [
  ['application/json', 'application/json; charset=utf-8'],
  ['application/graphql-response+json', 'application/graphql-response+json; charset=utf-8'],
] as const;

interface Answer {
  status: number;
  type: string | null;
  retryAfter: string | null;
  body: string;
}

describe('direct JSON POST answers exactly as Yoga does', () => {
  const log = memoryLog('debug');
  const server = listeningAtrium({ LOG_LEVEL: 'debug' }, { logger: log.logger });
  let key: string;
  let postId: string;
  let otherUserId: string;

  beforeAll(async () => {
    ({ key, postId } = await authorWithPost(server.atrium, 'directauthor', 'Direct'));
    otherUserId = (await server.atrium.caller({ handle: 'directother' })).userId;
  });

  async function post(accept: string, body: unknown, apiKey = key): Promise<Answer> {
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept, 'x-api-key': apiKey },
      body: JSON.stringify(body),
    });
    return {
      status: res.status,
      type: res.headers.get('content-type'),
      retryAfter: res.headers.get('retry-after'),
      body: await res.text(),
    };
  }

  /** The debug lines of operations named `name`: whether each was answered directly. */
  const paths = (name: string) =>
    log.lines
      .filter((l) => l.msg === 'graphql operation' && l.operationName === name)
      .map((l) => l.direct === true);

  const CASES: Array<[string, (name: string) => unknown]> = [
    [
      'a query with data',
      (n) => ({ query: `query ${n}($id: ID!) { post(id: $id) { title } }`, variables: { id: postId } }),
    ],
    [
      'a query with a FORBIDDEN field error beside data',
      (n) => ({
        query: `query ${n}($me: ID!, $other: ID!) { post(id: $me) { title } user(id: $other) { handle } }`,
        variables: { me: postId, other: otherUserId },
      }),
    ],
    [
      'a query whose variables do not coerce',
      (n) => ({ query: `query ${n}($id: ID!) { post(id: $id) { title } }`, variables: { id: 5.5 } }),
    ],
    [
      'a query missing a required variable',
      (n) => ({ query: `query ${n}($id: ID!) { post(id: $id) { title } }` }),
    ],
    [
      'a mutation whose payload carries validation errors',
      (n) => ({
        query: `mutation ${n}($input: CreatePostInput!) { createPost(input: $input) { post { id } errors { field message } } }`,
        variables: { input: { title: '   ', body: 'b' } },
      }),
    ],
  ];

  describe.each(PAIRS)('Accept %s', (direct, yoga) => {
    it.each(CASES)('%s', async (label, operation) => {
      const name = `Direct${label.replace(/[^a-z]/gi, '')}${direct.length}`;
      const a = await post(direct, operation(name));
      const b = await post(yoga, operation(name));
      expect(a).toEqual(b);
      expect(paths(name)).toEqual([true, false]);
    });
  });

  it('a refusal before execution (a syntax error) is left to Yoga', async () => {
    const res = await post('application/json', { query: 'query DirectBroken { post(' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).errors[0].message).toMatch(/Syntax Error/);
    const res2 = await post('application/graphql-response+json', { query: 'query DirectBroken { post(' });
    expect(res2.status).toBe(400);
  });

  it('the budget refusal is the same 429 with Retry-After on both paths', async () => {
    const spender = await server.atrium.caller({ handle: 'directspender' });
    // 4 × 232 = 928 points a request: the budget of 10,000 points is spent after 10.
    const list = 'posts(first: 1) { edges { node { comments(first: 1) { edges { node { id } } } } } }';
    const query = `query DirectSpend { ${[0, 1, 2, 3].map((i) => `a${i}: ${list}`).join(' ')} }`;
    let refused: Answer | undefined;
    for (let i = 0; i < 12 && !refused; i++) {
      const res = await post('application/json', { query }, spender.key);
      if (res.status !== 200) refused = res;
    }
    expect(refused?.status).toBe(429);
    const viaYoga = await post('application/json; charset=utf-8', { query }, spender.key);
    expect(refused).toEqual(viaYoga);
    expect(refused!.retryAfter).toBe('60');
    expect(JSON.parse(refused!.body).errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(paths('DirectSpend').at(-2)).toBe(true);
    expect(paths('DirectSpend').at(-1)).toBe(false);
  });

  it('answers an unauthenticated caller through Yoga (401), never directly', async () => {
    const res = await post(
      'application/json',
      { query: 'query DirectNoKey { posts(first: 1) { totalCount } }' },
      'atr_test_nope',
    );
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    expect(paths('DirectNoKey')).toEqual([]);
  });
});
