import { createClient as createSseClient } from 'graphql-sse';
import { describe, expect, it } from 'vitest';
import { listeningAtrium } from './support.js';

/**
 * /graphql/stream offers graphql-sse's distinct connections mode only (one stream per operation):
 * single connection mode's reservations are refused, and what a request asks for that the route
 * cannot give is answered at once, in GraphQL's error shape, with the headers every answer has.
 * Until 2026-11-28 one anonymous `PUT /graphql/stream` reserved a stream that the next graphql-sse
 * request, anyone's, was attached to instead of running its operation (graphql-sse's fastify
 * adapter reads a missing token header as the string "undefined", one token for everybody).
 */

const WITHIN_MS = 3_000;

const requestError = (message: string) => ({ errors: [{ message, extensions: { code: 'BAD_REQUEST' } }] });
const NOT_OFFERED = requestError(
  '/graphql/stream takes GET or POST, one stream per operation; reservations (PUT, DELETE) are not offered.',
);
const NOT_ACCEPTABLE = requestError(
  '/graphql/stream answers with an event stream: send Accept: text/event-stream.',
);
const UNSUPPORTED = requestError('Unsupported Content-Type: send the POST body as application/json.');

describe('/graphql/stream request rules', () => {
  const server = listeningAtrium();

  /** `{ __typename }` through graphql-sse's own client; rejects if no result comes in time. */
  function typenameOverSse(headers: Record<string, string> = {}): Promise<unknown> {
    const client = createSseClient({ url: `${server.base}/graphql/stream`, headers, retryAttempts: 0 });
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no result in ${WITHIN_MS} ms`)), WITHIN_MS);
      let result: unknown;
      client.subscribe(
        { query: '{ __typename }' },
        {
          next: (value) => (result = value),
          error: (err) => {
            clearTimeout(timer);
            reject(err instanceof Error ? err : new Error(JSON.stringify(err)));
          },
          complete: () => {
            clearTimeout(timer);
            resolve(result);
          },
        },
      );
    }).finally(() => client.dispose());
  }

  async function answer(res: Response) {
    return {
      status: res.status,
      contentType: res.headers.get('content-type'),
      allow: res.headers.get('allow'),
      requestId: /^req_/.test(res.headers.get('x-request-id') ?? ''),
      nosniff: res.headers.get('x-content-type-options'),
      body: res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text(),
    };
  }

  const stream = (init: RequestInit & { query?: string } = {}) =>
    fetch(`${server.base}/graphql/stream${init.query ?? ''}`, {
      signal: AbortSignal.timeout(WITHIN_MS),
      ...init,
    });

  it.each(['PUT', 'DELETE'])(
    '%s (a single-connection reservation): 405, Allow: GET, POST, in the error shape',
    async (method) => {
      const res = await stream({ method, headers: { accept: 'text/plain' }, query: '?operationId=x' });
      expect(await answer(res)).toEqual({
        status: 405,
        contentType: 'application/json; charset=utf-8',
        allow: 'GET, POST',
        requestId: true,
        nosniff: 'nosniff',
        body: NOT_OFFERED,
      });
    },
  );

  it("a refusal carries its status's standard reason phrase, which graphql-sse's client shows", async () => {
    // Until 2026-11-29 every refusal but a 400 read "Refused" (graphql-sse: "Server responded with 401: Refused").
    await expect(typenameOverSse({ 'x-api-key': 'atr_test_not_a_real_key' })).rejects.toThrow(
      'Server responded with 401: Unauthorized',
    );
    const res = await fetch(`${server.base}/graphql/stream?query=%7B__typename%7D`, {
      headers: { accept: 'text/event-stream', 'x-api-key': 'atr_test_not_a_real_key' },
    });
    expect([res.status, res.statusText]).toEqual([401, 'Unauthorized']);
    await res.body?.cancel();
  });

  it('after anonymous PUTs, graphql-sse clients still get their own results (no shared reservation)', async () => {
    // Whatever they are answered (405 above), they must leave nothing the next request could meet.
    for (let i = 0; i < 3; i++) await (await stream({ method: 'PUT' })).text();
    const results = await Promise.all([typenameOverSse(), typenameOverSse(), typenameOverSse()]);
    expect(results).toEqual(Array(3).fill({ data: { __typename: 'Query' } }));
  });

  it('a stream token sent anyway is ignored: the operation runs on its own stream', async () => {
    await stream({ method: 'PUT', headers: { 'x-graphql-event-stream-token': 'shared' } });
    const res = await stream({
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-graphql-event-stream-token': 'shared',
      },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('data: {"data":{"__typename":"Query"}}');
  });

  it.each([
    ['no Accept', undefined],
    ['*/*', '*/*'],
    ['text/*', 'text/*'],
    ['a list naming it', 'application/json;q=0.9, text/event-stream'],
  ])('Accept %s: the operation streams', async (_name, accept) => {
    const res = await stream({
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(accept === undefined ? {} : { accept }) },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await res.text()).toContain('data: {"data":{"__typename":"Query"}}');
  });

  it.each([
    ['application/json', 'POST'],
    ['text/event-stream;q=0, application/json', 'POST'],
    ['text/html', 'GET'],
  ])('Accept %s (%s): 406 in the error shape, nothing runs', async (accept, method) => {
    const res = await stream({
      method,
      headers: { accept, ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) },
      ...(method === 'POST'
        ? { body: JSON.stringify({ query: '{ __typename }' }) }
        : { query: '?query=%7B__typename%7D' }),
    });
    expect(await answer(res)).toEqual({
      status: 406,
      contentType: 'application/json; charset=utf-8',
      allow: null,
      requestId: true,
      nosniff: 'nosniff',
      body: NOT_ACCEPTABLE,
    });
  });

  it.each([
    ['/graphql', undefined],
    ['/graphql/stream', 'text/event-stream'],
  ])('%s: a POST body that is not JSON is 415 in the error shape', async (path, accept) => {
    for (const contentType of ['text/plain', 'application/xml']) {
      const res = await fetch(`${server.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': contentType, ...(accept ? { accept } : {}) },
        body: JSON.stringify({ query: '{ __typename }' }),
        signal: AbortSignal.timeout(WITHIN_MS),
      });
      expect(await answer(res)).toEqual({
        status: 415,
        contentType: 'application/json; charset=utf-8',
        allow: null,
        requestId: true,
        nosniff: 'nosniff',
        body: UNSUPPORTED,
      });
    }
  });
});
