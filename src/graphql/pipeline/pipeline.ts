import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  getOperationAST,
  GraphQLError,
  type GraphQLSchema,
  type OperationTypeNode,
} from 'graphql';
import {
  createYoga,
  type GraphiQLOptions,
  handleStreamOrSingleExecutionResult,
  type Plugin,
  type YogaServerInstance,
} from 'graphql-yoga';
import type { Credentials } from '../../auth/authenticator.js';
import type { Principal } from '../../auth/principal.js';
import type { Services } from '../../compose.js';
import { DomainError } from '../../domain/errors.js';
import { STORE_RETRY_AFTER_SECONDS } from '../../store/errors.js';
import type { StoreOutageLog } from '../../store/outage-log.js';
import { enterRequestScope, type RequestScope, runWithSignal } from '../../domain/request-scope.js';
import { headerValue } from '../../http/auth.js';
import { createContext, type GraphQLContext, renewLoaders } from '../context.js';
import { storeUnavailableError, toGraphQLError } from '../errors.js';
import type { CommentFeed } from '../subscriptions/comment-feed.js';
import { subscriptionByGetPlugin, subscriptionByPostPlugin } from './get-queries-only.js';
import { notAcceptablePlugin } from './not-acceptable.js';
import { malformedParamsPlugin } from './http-params.js';
import { operationObserver, type OperationObserver } from './observe.js';
import { type OperationParams, type PersistedQueries } from './persisted.js';
import { pipelinePlugins } from './plugins.js';
import { GRAPHQL_PATH, GRAPHQL_SSE_PATH } from '../paths.js';

export type Transport = 'http' | 'ws' | 'sse';

/** Who is calling and from where, as the transport learned it. */
export interface Caller {
  transport: Transport;
  principal: Principal | null;
  address: string;
  requestId: string;
  /** graphql-ws: the client's id of the operation on its connection (GraphQLContext.operationId). */
  operationId?: string | undefined;
  signal?: AbortSignal | undefined;
  /** What a WebSocket or SSE caller presented, so a long-lived subscription can check it again. */
  credentials?: Credentials | undefined;
}

/** Yoga's server context for POST and GET: the Fastify request and reply. */
export interface HttpServerContext {
  req: FastifyRequest;
  reply: FastifyReply;
}

/** The initial context WebSocket and SSE hand to `getEnveloped`: the caller, already known. */
interface StreamServerContext {
  caller: Caller;
}

export type Prepared = { args: ExecutionArgs } | { errors: readonly GraphQLError[] };
type Refused = { errors: readonly GraphQLError[] };
type Ready = {
  enveloped: ReturnType<YogaServerInstance<HttpServerContext, GraphQLContext>['getEnveloped']>;
  operation: OperationTypeNode;
  args: ExecutionArgs;
};

export interface GraphQLPipeline {
  /** POST and GET (and GraphiQL) through Yoga, with the pipeline's plugins. */
  yoga: YogaServerInstance<HttpServerContext, GraphQLContext>;
  persisted: PersistedQueries;
  /**
   * The caller from the two credentials every transport reads; bad ones raise UNAUTHENTICATED.
   * `ids` name the request (and graphql-ws operation) in the log line of an unexpected failure.
   */
  authenticate(credentials: Credentials, ids: OperationIds): Promise<Principal | null>;
  /**
   * WebSocket and SSE: persisted query → parse → validate (depth, complexity, introspection) →
   * context, the same steps Yoga runs for HTTP; execute/subscribe then spend the budget.
   */
  prepare(params: OperationParams, caller: Caller): Promise<Prepared>;
  /**
   * A query or mutation a plain JSON POST carried, run through the same envelop plugins Yoga runs
   * (persisted query, parse and validation caches, limits, credentials, budget, jit, masking), but
   * without Yoga's Fetch layer. Undefined when anything about it is not a clean success up to
   * execution (a refusal of any kind, a subscription): Yoga then answers the request as always, so
   * every refusal keeps Yoga's wording and status. Nothing before execution has side effects.
   */
  executeDirect(
    params: OperationParams,
    http: HttpServerContext,
    scope: RequestScope | undefined,
  ): Promise<ExecutionResult | undefined>;
  /** Per-operation metrics and log lines; transports report what they refuse themselves. */
  observer: OperationObserver;
}

/**
 * Credentials refused: the GraphQL error, with 401 and the `WWW-Authenticate` challenge REST sends
 * (`Bearer error="invalid_token", ...` from the core's error, else `Bearer`) for HTTP transports.
 */
export function unauthenticatedError(err: unknown): GraphQLError {
  const mapped = toGraphQLError(err);
  const message = mapped instanceof Error ? mapped.message : 'The credentials are not valid.';
  const challenge = err instanceof DomainError ? err.meta.wwwAuthenticate : undefined;
  const headers = { 'WWW-Authenticate': typeof challenge === 'string' ? challenge : 'Bearer' };
  return new GraphQLError(message, {
    extensions: { code: 'UNAUTHENTICATED', http: { status: 401, headers } },
  });
}

/** The core's codes that mean "these credentials are refused": anything else is not the caller's fault. */
const CREDENTIAL_CODES = new Set(['unauthenticated', 'invalid_api_key', 'invalid_token', 'token_expired']);

/** Which request (and, over graphql-ws, which operation of the connection) a log line belongs to. */
export type OperationIds = { requestId?: string | undefined; operationId?: string | undefined };

/**
 * Why checking the credentials failed, as the GraphQL error every transport answers: refused
 * credentials are UNAUTHENTICATED (401); a store that cannot be reached is SERVICE_UNAVAILABLE with
 * REST's 503 and `Retry-After: 1` and no storage text (docs/deployment.md, PostgreSQL restarting),
 * logged once per outage through `outage`, the process's log; anything else is a masked
 * INTERNAL_SERVER_ERROR (500), logged with its cause and the request's id (`ids`; until 2026-11-29
 * the line carried no `reqId`).
 */
export function authenticationError(
  err: unknown,
  log: { error(obj: object, msg: string): void },
  outage: Pick<StoreOutageLog, 'unreachable'>,
  ids: OperationIds = {},
): GraphQLError {
  if (err instanceof GraphQLError) return err;
  if (err instanceof DomainError && CREDENTIAL_CODES.has(err.code)) return unauthenticatedError(err);
  if (outage.unreachable(err) || (err instanceof DomainError && err.code === 'unavailable')) {
    // Refused before execution (no data): a request error, so REST's 503 and header.
    const retryAfter = String(STORE_RETRY_AFTER_SECONDS);
    return storeUnavailableError(undefined, { status: 503, headers: { 'Retry-After': retryAfter } });
  }
  log.error({ err, reqId: ids.requestId, operationId: ids.operationId }, 'graphql authentication failed');
  return new GraphQLError('Unexpected error.', {
    extensions: { code: 'INTERNAL_SERVER_ERROR', http: { status: 500 } },
  });
}

/** A document that does not parse: GRAPHQL_PARSE_FAILED, as Yoga codes it on POST and GET. */
function parseFailed(err: unknown): unknown {
  if (!(err instanceof GraphQLError) || err.extensions.code !== undefined) return err;
  return new GraphQLError(err.message, {
    source: err.source,
    positions: err.positions,
    originalError: err.originalError,
    extensions: { ...err.extensions, code: 'GRAPHQL_PARSE_FAILED' },
  });
}

/**
 * Anything that is not a GraphQL error with a code of ours (or a core DomainError, mapped by the one
 * table in ../errors.ts) is masked as INTERNAL_SERVER_ERROR (`Unexpected error.`) and logged with
 * its cause, which no client sees in any mode: until 2026-11-28 development (NODE_ENV's default)
 * sent it as `extensions.originalError`, stack and storage text included. A resolver that meets a database outage is the exception: it is worth retrying,
 * so it answers SERVICE_UNAVAILABLE at its path (`storeUnavailableError`), in every mode, with no
 * cause shown; the outage is logged once through the process's log (`Services.storeOutage`), not
 * once per error. Every transport's errors pass here, so this is the one place that decides it.
 * It carries no HTTP status: a field error leaves the result a GraphQL response with `data`, which
 * GraphQL over HTTP answers 200 (docs/graphql.md, Errors).
 */
function maskError(services: Services) {
  return (error: unknown, ids: OperationIds = {}): Error => {
    const mapped = toGraphQLError(error);
    if (mapped instanceof GraphQLError) {
      const original = mapped.originalError;
      if (!original || original instanceof GraphQLError || original instanceof DomainError) {
        return withoutOriginalError(mapped);
      }
    }
    const cause = mapped instanceof GraphQLError ? (mapped.originalError ?? mapped) : mapped;
    const located = mapped instanceof GraphQLError ? mapped : undefined;
    if (services.storeOutage.unreachable(cause)) return storeUnavailableError(located);
    services.logger.error(
      { err: cause, reqId: ids.requestId, operationId: ids.operationId },
      'graphql operation failed',
    );
    return new GraphQLError('Unexpected error.', {
      nodes: located?.nodes,
      source: located?.source,
      positions: located?.positions,
      path: located?.path,
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
  };
}

/**
 * The same masking as Yoga's, run inside the operation where its context (and so its request id)
 * is known: Yoga's own `maskError` sees only the error, so its log line could not say which request
 * failed, and it runs after every other plugin, so the observer's operation line recorded the
 * unmasked error (`codes: [null]`) rather than the code the client saw. It must come before the
 * observer; Yoga's pass then finds every error already masked and leaves it as it is.
 */
function maskInOperation(mask: (error: unknown, ids?: OperationIds) => Error): Plugin {
  const idsOf = (args: ExecutionArgs): OperationIds => {
    const context = args.contextValue as Partial<GraphQLContext> | undefined;
    return { requestId: context?.requestId, operationId: context?.operationId };
  };
  const masking =
    (ids: OperationIds) =>
    ({ result, setResult }: { result: ExecutionResult; setResult(r: ExecutionResult): void }) => {
      if (!result.errors?.length) return;
      setResult({ ...result, errors: result.errors.map((e) => mask(e, ids) as GraphQLError) });
    };
  return {
    onExecute({ args }) {
      const handle = masking(idsOf(args));
      return { onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, handle) };
    },
    onSubscribe({ args }) {
      const ids = idsOf(args);
      const handle = masking(ids);
      return {
        onSubscribeResult: (payload) => handleStreamOrSingleExecutionResult(payload, handle),
        onSubscribeError: ({ error, setError }) => setError(mask(error, ids)),
      };
    },
  };
}

/**
 * Yoga writes the cause of some request errors into `extensions.originalError` itself (the
 * SyntaxError of a malformed JSON body, whose message quotes the body); it is taken out like any
 * other cause, in every mode.
 * Yoga also reads that very extension to answer such an error 400 rather than 200 under
 * `Accept: application/json` (`http.spec` errors are otherwise 200 there), so the error's status is
 * kept by marking it as not a spec one: 400 whatever the client accepts, as before.
 */
function withoutOriginalError(error: GraphQLError): GraphQLError {
  if (!error.extensions || !('originalError' in error.extensions)) return error;
  const { originalError: _cause, ...extensions } = error.extensions;
  const http = extensions.http as { spec?: boolean } | undefined;
  if (http?.spec) extensions.http = { ...http, spec: false };
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions,
  });
}

let graphiqlPage: string | undefined;

/**
 * GraphiQL sends subscriptions over graphql-sse, not graphql-ws: its Headers tab becomes HTTP
 * headers on every request it makes over HTTP, but never the `connection_init` payload of a
 * WebSocket, so with graphql-ws a person's API key applied to their queries while their
 * subscriptions ran anonymous and heard nothing of drafts. `subscriptionsEndpoint` is read by the
 * page's executor (@graphql-tools/url-loader) though Yoga's type does not list it; without it the
 * page would post subscriptions to `/graphql`, which is not where graphql-sse is served.
 */
const GRAPHIQL: GraphiQLOptions & { subscriptionsEndpoint: string } = {
  title: 'Atrium GraphiQL',
  subscriptionsProtocol: 'GRAPHQL_SSE',
  subscriptionsEndpoint: GRAPHQL_SSE_PATH,
  shouldPersistHeaders: false,
};

export function createPipeline(
  services: Services,
  schema: GraphQLSchema,
  persisted: PersistedQueries,
  commentFeed: CommentFeed | undefined,
): GraphQLPipeline {
  const production = services.config.nodeEnv === 'production';
  const observer = operationObserver(services.metrics, services.logger);
  const mask = maskError(services);

  async function authenticate(credentials: Credentials, ids: OperationIds): Promise<Principal | null> {
    try {
      return await services.authenticator.authenticate(credentials);
    } catch (err) {
      throw authenticationError(err, services.logger, services.storeOutage, ids);
    }
  }

  /**
   * A stream's credentials checked again, through the same step and error mapping as at its start:
   * UNAUTHENTICATED once they stop holding, SERVICE_UNAVAILABLE while the store cannot be reached.
   * Resolves to the caller as they are now (their role may have changed since the stream began).
   */
  function recheck(credentials: Credentials, ids: OperationIds): Promise<Principal | null> {
    return authenticate(credentials, ids);
  }

  /**
   * An HTTP request's caller, checked once per request. A POST the direct path declines (refused
   * credentials, a database that cannot be reached) is answered by Yoga, which builds the context
   * again: it reuses the first check's outcome, refusal included, rather than asking the store a
   * second time and counting one failed check as two in the outage log.
   */
  const callers = new WeakMap<FastifyRequest, Promise<Principal | null>>();
  function callerOf(req: FastifyRequest): Promise<Principal | null> {
    let principal = callers.get(req);
    if (principal === undefined) {
      principal = authenticate(
        { authorization: headerValue(req, 'authorization'), apiKey: headerValue(req, 'x-api-key') },
        { requestId: req.id },
      );
      callers.set(req, principal);
    }
    return principal;
  }

  const yoga = createYoga<HttpServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    // Cross-origin rules are the HTTP layer's, for every route alike (src/http/cors.ts: the exact
    // origins of CORS_ORIGINS). Yoga's own default echoes any Origin with credentials allowed, and
    // did so on /graphql until 2026-11-28.
    cors: false,
    logging: false,
    landingPage: false,
    batching: false,
    // Fastify's BODY_LIMIT_BYTES already answers a larger body with 413 before Yoga reads it;
    // Yoga's own limit (25 MB) would only pipe every request body through one more stream.
    maxRequestBodySize: false,
    // GraphiQL from the installed package (scripts, styles and workers inlined), development only.
    graphiql: production ? false : GRAPHIQL,
    renderGraphiQL: (options) => (graphiqlPage ??= renderGraphiQL(options)),
    // No mode shows a cause: the spec has no development exception (see maskError).
    maskedErrors: { maskError: (error) => mask(error), isDev: false },
    plugins: [
      {
        // Persisted queries for POST and GET; WebSocket and SSE resolve them in prepare().
        async onParams({ params, setParams }) {
          const query = await persisted.resolve(params);
          setParams({ ...params, query });
        },
      },
      malformedParamsPlugin,
      subscriptionByGetPlugin,
      subscriptionByPostPlugin(),
      // After it: a subscription by POST is refused in its words.
      notAcceptablePlugin(),
      observer.httpPlugin,
      maskInOperation(mask),
      // Before the budget plugin: its early stop ends the hooks that follow it.
      observer.plugin,
      ...pipelinePlugins({
        production,
        limiter: services.limiter,
        logger: services.logger,
        health: services.sharedHealth,
      }),
    ],
    context: async (initial) => {
      const stream = (initial as unknown as Partial<StreamServerContext>).caller;
      const caller: Caller = stream ?? {
        transport: 'http',
        principal: await callerOf(initial.req),
        address: initial.req.ip,
        requestId: initial.req.id,
        signal: initial.request.signal,
      };
      const { credentials, requestId, operationId } = caller;
      return createContext(services, caller.principal, caller.requestId, caller.signal, {
        address: caller.address,
        commentFeed,
        recheck:
          credentials && caller.principal
            ? () => recheck(credentials, { requestId, operationId })
            : undefined,
        operationId: caller.operationId,
      });
    },
  });

  async function prepare(params: OperationParams, caller: Caller): Promise<Prepared> {
    const prepared = await prepareOperation(params, caller);
    if ('errors' in prepared && caller.transport !== 'http') {
      observer.rejected(
        caller.transport,
        caller.requestId,
        params.operationName,
        prepared.errors,
        caller.operationId,
      );
    }
    return prepared;
  }

  /**
   * Every step before execution, the same for every transport: the persisted query, then through
   * the enveloped plugins parse, validate (limits, introspection), the operation, and the context
   * (the caller). A refusal comes back as errors; GraphQLErrors thrown on the way (persisted query,
   * credentials) are refusals too, anything else throws.
   */
  async function envelop(params: OperationParams, initialContext: object): Promise<Ready | Refused> {
    try {
      const query = await persisted.resolve(params);
      const enveloped = yoga.getEnveloped({ ...initialContext, params: { ...params, query } } as never);
      let document: DocumentNode;
      try {
        document = enveloped.parse(query);
      } catch (err) {
        throw parseFailed(err);
      }
      const errors = enveloped.validate(enveloped.schema, document);
      if (errors.length > 0) return { errors };
      const operationName = params.operationName ?? undefined;
      const operation = getOperationAST(document, operationName);
      if (!operation) {
        // Yoga's own words for the same case over HTTP, so every transport says the same.
        const message = 'Could not determine what operation to execute.';
        const extensions = { code: 'OPERATION_RESOLUTION_FAILURE', http: { status: 400 } };
        return { errors: [new GraphQLError(message, { extensions })] };
      }
      const contextValue = await enveloped.contextFactory();
      return {
        enveloped,
        operation: operation.operation,
        args: {
          schema: enveloped.schema,
          document,
          operationName,
          variableValues: (params.variables ?? undefined) as Record<string, unknown> | undefined,
          contextValue,
        },
      };
    } catch (err) {
      if (err instanceof GraphQLError) return { errors: [err] };
      throw err;
    }
  }

  async function prepareOperation(params: OperationParams, caller: Caller): Promise<Prepared> {
    const ready = await envelop(params, { caller });
    if ('errors' in ready) return ready;
    const { enveloped, args, operation } = ready;
    // A mutation over graphql-ws or graphql-sse has the deadline an HTTP request has: once it passes,
    // no statement of it starts and an open transaction rolls back; the answer is then
    // SERVICE_UNAVAILABLE, as HTTP's 503. Its scope ends with the execution.
    const execute =
      operation === 'mutation'
        ? (a: ExecutionArgs) =>
            runWithSignal(AbortSignal.timeout(services.config.requestTimeoutMs), async () =>
              enveloped.execute(a),
            )
        : enveloped.execute;
    // graphql-ws and graphql-sse call execute/subscribe with these args; the enveloped ones travel
    // along so the budget and error masking run there too.
    const subscribe = (a: ExecutionArgs) => freshLoadersPerEvent(enveloped.subscribe(a), a.contextValue);
    return { args: { ...args, rootValue: { execute, subscribe } } };
  }

  /**
   * `scope` is the HTTP request's (its deadline): a mutation executes inside it, so past the deadline
   * its transaction rolls back; a query reads outside it (request-context.ts, `scopeInHandler`).
   */
  async function executeDirect(
    params: OperationParams,
    http: HttpServerContext,
    scope: RequestScope | undefined,
  ): Promise<ExecutionResult | undefined> {
    // What the context factory and the observer read of Yoga's Request: its method and signal.
    const request = { method: 'POST', signal: scope?.signal };
    let ready: Ready | Refused;
    try {
      ready = await envelop(params, { ...http, request, direct: true });
    } catch {
      return undefined;
    }
    if ('errors' in ready || ready.operation === 'subscription') return undefined;
    try {
      const { enveloped, args } = ready;
      const execute = () => enveloped.execute(args);
      return (await (ready.operation === 'mutation' && scope
        ? enterRequestScope(scope, execute)
        : execute())) as ExecutionResult;
    } catch (err) {
      // As Yoga answers an execution that throws (the budget's store failing, say): masked.
      const masked = mask(err, { requestId: http.req.id });
      return { errors: [masked instanceof GraphQLError ? masked : new GraphQLError(masked.message)] };
    }
  }

  return { yoga, persisted, authenticate, prepare, executeDirect, observer };
}

/**
 * A subscription's results, each event executed with DataLoaders of its own. The executor runs every
 * event with the subscription's one context, so loaders made with it would serve what the first
 * event read for the subscription's life: a renamed user or a retitled post stayed as it was, a user
 * deleted since still resolved, and the cache grew with every author and post the stream ever met
 * (until 2026-11-28). Each event is executed inside the `next()` that asks for it (graphql-ws and
 * graphql-sse ask for one once the last has been sent), so fresh loaders set on the context just
 * before are that event's alone; they are built for the same caller, so the core still decides what
 * the subscriber may see. A refusal (a single result) passes unchanged.
 */
async function freshLoadersPerEvent(subscribed: unknown, contextValue: unknown): Promise<unknown> {
  const result = await subscribed;
  if (!isAsyncIterable(result)) return result;
  const context = contextValue as GraphQLContext;
  const events = result[Symbol.asyncIterator]();
  const perEvent: AsyncGenerator<ExecutionResult> = {
    next: () => {
      renewLoaders(context);
      return events.next() as Promise<IteratorResult<ExecutionResult>>;
    },
    return: (value) =>
      (events.return?.(value) ?? Promise.resolve({ done: true, value })) as Promise<
        IteratorResult<ExecutionResult>
      >,
    throw: (err) => (events.throw?.(err) ?? Promise.reject(err)) as Promise<IteratorResult<ExecutionResult>>,
    [Symbol.asyncIterator]: () => perEvent,
  };
  return perEvent as never;
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] === 'function';

/** For graphql-ws and graphql-sse: run the enveloped execute/subscribe that prepare() attached. */
export const envelopedExecute = (args: ExecutionArgs) =>
  (args.rootValue as { execute: (a: ExecutionArgs) => unknown }).execute(args);
export const envelopedSubscribe = (args: ExecutionArgs) =>
  (args.rootValue as { subscribe: (a: ExecutionArgs) => unknown }).subscribe(args);
