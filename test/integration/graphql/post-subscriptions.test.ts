import { ApolloClient, CombinedGraphQLErrors, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { describe, expect, it } from 'vitest';
import { SUBSCRIPTION_BY_POST_MESSAGE } from '../../../src/graphql/pipeline/get-queries-only.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * A subscription sent by a plain `POST /graphql`. Only an Accept that names `text/event-stream`
 * gets Yoga's event stream; anything else is refused at once, in GraphQL's error shape, with the
 * way to subscribe. Until 2026-11-28 an Accept that is absent or `*\/*` picked the event stream by
 * wildcard and was never answered (no status line until shutdown), and one naming only JSON got
 * 406 with the body `null`.
 */

const SUBSCRIPTION = 'subscription($p: ID!) { commentAdded(postId: $p) { id } }';

const refusal = { errors: [{ message: SUBSCRIPTION_BY_POST_MESSAGE, extensions: { code: 'BAD_REQUEST' } }] };

describe('POST /graphql: a subscription without Accept: text/event-stream', () => {
  const server = listeningAtrium();

  async function post(headers: Record<string, string>) {
    const { postId, key } = await authorWithPost(
      server.atrium,
      `sub${Math.random().toString(36).slice(2, 8)}`,
      'P',
    );
    return fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { p: postId } }),
      // The old code never sent a status line: fail the test rather than hang it.
      signal: AbortSignal.timeout(5_000),
    });
  }

  it.each([
    ['absent', undefined, 400],
    ['*/*', '*/*', 400],
    ['text/*', 'text/*', 400],
    ['application/json', 'application/json', 406],
    ['application/graphql-response+json', 'application/graphql-response+json', 406],
    ['text/html', 'text/html', 406],
    [
      "Apollo Client's default",
      'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9',
      406,
    ],
  ])('Accept %s: refused at once with the way to subscribe', async (_name, accept, status) => {
    const res = await post(accept === undefined ? {} : { accept });
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/(graphql-response\+)?json/);
    expect(await res.json()).toEqual(refusal);
  });

  it('Accept: text/event-stream still gets the event stream at once', async () => {
    const controller = new AbortController();
    const { postId, key } = await authorWithPost(server.atrium, 'substream', 'P');
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': key },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { p: postId } }),
      signal: AbortSignal.any([controller.signal, AbortSignal.timeout(5_000)]),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    controller.abort();
  });

  it('Apollo Client (HttpLink) gets the refusal as a GraphQL error, not a bare ServerError', async () => {
    const { postId, key } = await authorWithPost(server.atrium, 'subapollo', 'P');
    const client = new ApolloClient({
      link: new HttpLink({ uri: `${server.base}/graphql`, headers: { 'x-api-key': key } }),
      cache: new InMemoryCache(),
    });
    // Apollo Client 4 hands a failed subscription over as `error` on a result, or as an error.
    const error = await new Promise<unknown>((resolve) => {
      const timer = setTimeout(() => resolve(new Error('no answer')), 5_000);
      const done = (e: unknown) => {
        clearTimeout(timer);
        sub.unsubscribe();
        resolve(e);
      };
      const sub = client
        .subscribe({ query: gql(SUBSCRIPTION), variables: { p: postId } })
        .subscribe({ next: (r) => done((r as { error?: unknown }).error ?? r), error: done });
    });
    expect(CombinedGraphQLErrors.is(error)).toBe(true);
    expect((error as CombinedGraphQLErrors).errors).toEqual(refusal.errors);
    client.stop();
  });
});
