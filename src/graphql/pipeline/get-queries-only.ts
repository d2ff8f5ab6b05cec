import { getOperationAST, GraphQLError } from 'graphql';
import { type Plugin, processRegularResult } from 'graphql-yoga';
import { GRAPHQL_PATH } from '../paths.js';

export const SUBSCRIPTION_BY_GET_MESSAGE =
  'Can only perform a subscription operation over graphql-ws at /graphql, graphql-sse at /graphql/stream or a POST request, not by GET /graphql.';

/**
 * The spec's GET on the GraphQL endpoint runs queries only. Yoga refuses a mutation by GET itself
 * (405), but serves a subscription by GET as its own event stream; this refuses that the same way.
 * Subscriptions by GET stay open at /graphql/stream (graphql-sse's distinct connections), a
 * separate endpoint whose context has no Yoga request.
 */
export const subscriptionByGetPlugin: Plugin = {
  onParse() {
    return ({ result, context }) => {
      const { request, params } = context as { request?: Request; params?: { operationName?: string } };
      if (request?.method !== 'GET' || result instanceof Error || !result) return;
      if (new URL(request.url).pathname !== GRAPHQL_PATH) return;
      if (getOperationAST(result, params?.operationName)?.operation !== 'subscription') return;
      throw new GraphQLError(SUBSCRIPTION_BY_GET_MESSAGE, {
        extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'POST' } } },
      });
    };
  },
};

export const SUBSCRIPTION_BY_POST_MESSAGE =
  'A subscription by POST /graphql is answered only as an event stream: send Accept: text/event-stream, or subscribe over graphql-ws at /graphql or graphql-sse at /graphql/stream.';

/** The media ranges of an Accept header, lower case, without those refused with q=0. */
function mediaRanges(accept: string | null): string[] {
  if (accept === null || accept.trim() === '') return [];
  return accept.split(',').flatMap((range) => {
    const [type = '', ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    return type === '' || params.some((p) => /^q=0(\.0*)?$/.test(p)) ? [] : [type];
  });
}

/**
 * A subscription by `POST /graphql` is served as Yoga's event stream only when the request's Accept
 * names `text/event-stream`; anything else is refused at once, in GraphQL's error shape, saying how
 * to subscribe. Yoga would pick its event stream for a wildcard (no Accept, `*\/*`, `text/*`), which
 * a client expecting JSON never reads as such (until 2026-11-28 such a request sent no status line
 * before shutdown), and would answer an Accept naming only JSON (Apollo Client's HttpLink
 * included: it asks for multipart/mixed, which Yoga serves no subscription with) with 406 and the
 * body `null`. An Accept naming media types, none of them the event stream, is 406; no Accept or
 * wildcards only (the client accepts anything; the request is what cannot be served) is 400.
 */
export function subscriptionByPostPlugin(): Plugin {
  const refused = new WeakSet<Request>();
  return {
    onParse() {
      return ({ result, context }) => {
        const { request, params } = context as {
          request?: Request;
          params?: { operationName?: string };
        };
        if (request?.method !== 'POST' || result instanceof Error || !result) return;
        // The direct path's stand-in request has no URL: it hands subscriptions to Yoga anyway.
        if (typeof request.url !== 'string') return;
        if (new URL(request.url).pathname !== GRAPHQL_PATH) return;
        if (getOperationAST(result, params?.operationName)?.operation !== 'subscription') return;
        const ranges = mediaRanges(request.headers.get('accept'));
        if (ranges.includes('text/event-stream')) return;
        refused.add(request);
        const named = ranges.some((type) => !type.endsWith('/*'));
        throw new GraphQLError(SUBSCRIPTION_BY_POST_MESSAGE, {
          extensions: { code: 'BAD_REQUEST', http: { status: named ? 406 : 400 } },
        });
      };
    },
    onResultProcess({ request, setResultProcessor }) {
      if (!refused.has(request)) return;
      // JSON whatever the Accept: Yoga would otherwise stream the refusal as an event (wildcards) or
      // answer 406 with no body (an Accept it has no processor for, text/html say).
      const ranges = mediaRanges(request.headers.get('accept'));
      const type = ranges.includes('application/graphql-response+json')
        ? 'application/graphql-response+json'
        : 'application/json';
      setResultProcessor(processRegularResult, type);
    },
  };
}
