import { getOperationAST, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
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
