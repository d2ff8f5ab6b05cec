import { type ExecutionArgs, type ExecutionResult, getOperationAST, type GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';

/** The transport label: POST and GET are told apart, as the HTTP metrics tell them apart. */
export type TransportLabel = 'post' | 'get' | 'ws' | 'sse';
export type Outcome = 'ok' | 'error' | 'rejected';

interface GraphQLMetrics {
  operations: Counter<'transport' | 'operation_type' | 'outcome'>;
  seconds: Histogram<'transport' | 'operation_type'>;
}

const OPERATIONS = 'atrium_graphql_operations_total';
const SECONDS = 'atrium_graphql_operation_duration_seconds';

function metricsIn(registry: Registry): GraphQLMetrics {
  const existing = registry.getSingleMetric(OPERATIONS);
  if (existing) {
    // Tests may build several apps on one set of services; metrics are registered once.
    return {
      operations: existing as GraphQLMetrics['operations'],
      seconds: registry.getSingleMetric(SECONDS) as GraphQLMetrics['seconds'],
    };
  }
  return {
    operations: new Counter({
      name: OPERATIONS,
      help: 'GraphQL operations by transport, operation type and outcome (ok, error: executed with errors, rejected: refused before execution)',
      labelNames: ['transport', 'operation_type', 'outcome'],
      registers: [registry],
    }),
    seconds: new Histogram({
      name: SECONDS,
      help: 'GraphQL execution time (a subscription: until it is set up), by transport and operation type',
      labelNames: ['transport', 'operation_type'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}

/**
 * A result that carries no `data` was refused before any resolver ran (parse, validation, variables,
 * budget, persisted query, credentials); one with `data` and `errors` executed and partly failed.
 */
function outcomeOf(result: ExecutionResult): Outcome {
  if (!('data' in result) || result.data === undefined) return 'rejected';
  return result.errors?.length ? 'error' : 'ok';
}

const codesOf = (errors: readonly GraphQLError[] | undefined) =>
  errors?.length ? errors.map((e) => (e.extensions?.code as string | undefined) ?? null) : undefined;

/** What the stream transports put in the initial context (see pipeline.ts). */
type StreamCaller = { transport: 'ws' | 'sse'; requestId: string; operationId?: string | undefined };
type Observed = {
  caller?: StreamCaller;
  /** Set by the direct POST path (../transports/direct-post.ts): the answer did not go through Yoga. */
  direct?: boolean;
  request?: Request;
  requestId?: string;
  params?: { operationName?: string | null };
};

export interface OperationObserver {
  /**
   * Envelop hooks (every transport): times each execution and subscription and records its outcome,
   * budget refusals included. Must come before the budget plugin, whose early stop ends the chain.
   */
  plugin: Plugin;
  /** Yoga hook (POST and GET): records requests refused before execution. */
  httpPlugin: Plugin;
  /** WebSocket and SSE: an operation refused before execution (credentials, persisted query, parse, validation). */
  rejected(
    transport: 'ws' | 'sse',
    requestId: string,
    operationName: string | null | undefined,
    errors: readonly GraphQLError[],
    operationId?: string,
  ): void;
}

/**
 * One metric and one log line per GraphQL operation, whatever the transport, in the registry
 * /metrics serves. POST and GET already get the HTTP request line, so their operation line is debug;
 * WebSocket and SSE have no per-operation request line, so theirs is info.
 */
export function operationObserver(registry: Registry, logger: Logger): OperationObserver {
  const metrics = metricsIn(registry);
  const executed = new WeakSet<Request>();

  function record(
    transport: TransportLabel,
    operationType: string,
    outcome: Outcome,
    fields: {
      requestId?: string | undefined;
      operationId?: string | undefined;
      operationName?: string | null | undefined;
      ms?: number;
      direct?: boolean;
    },
    errors?: readonly GraphQLError[],
  ) {
    metrics.operations.inc({ transport, operation_type: operationType, outcome });
    const level = transport === 'ws' || transport === 'sse' ? 'info' : 'debug';
    if (!logger.isLevelEnabled(level)) return;
    logger[level](
      {
        transport,
        reqId: fields.requestId,
        ...(fields.operationId === undefined ? {} : { operationId: fields.operationId }),
        operationType,
        operationName: fields.operationName ?? null,
        outcome,
        codes: codesOf(errors),
        ms: fields.ms,
        ...(fields.direct ? { direct: true } : {}),
      },
      'graphql operation',
    );
  }

  function transportOf(context: Observed): TransportLabel {
    if (context.caller) return context.caller.transport;
    return context.request?.method === 'GET' ? 'get' : 'post';
  }

  function started(args: ExecutionArgs) {
    const context = (args.contextValue ?? {}) as Observed;
    if (!context.caller && context.request) executed.add(context.request);
    const transport = transportOf(context);
    const operation = getOperationAST(args.document, args.operationName);
    const operationType = operation?.operation ?? 'unknown';
    const operationName = args.operationName ?? operation?.name?.value;
    const start = performance.now();
    return (result: ExecutionResult | undefined, subscribed = false) => {
      const seconds = (performance.now() - start) / 1000;
      const outcome = subscribed ? 'ok' : result ? outcomeOf(result) : 'error';
      if (outcome !== 'rejected')
        metrics.seconds.observe({ transport, operation_type: operationType }, seconds);
      record(
        transport,
        operationType,
        outcome,
        {
          requestId: context.caller?.requestId ?? context.requestId,
          operationId: context.caller?.operationId,
          operationName,
          ms: Math.round(seconds * 10_000) / 10,
          direct: context.direct === true,
        },
        result?.errors,
      );
    };
  }

  const isIterable = (v: unknown): v is AsyncIterable<unknown> =>
    typeof v === 'object' && v !== null && Symbol.asyncIterator in v;

  const plugin: Plugin = {
    onExecute({ args }) {
      const done = started(args);
      return {
        onExecuteDone({ result }) {
          // Incremental delivery is not served; a stream here would be one operation anyway.
          done(isIterable(result) ? undefined : result, isIterable(result));
        },
      };
    },
    onSubscribe({ args }) {
      const done = started(args);
      return {
        onSubscribeResult({ result }) {
          done(isIterable(result) ? undefined : (result as ExecutionResult), isIterable(result));
        },
        onSubscribeError() {
          done(undefined);
        },
      };
    },
  };

  const httpPlugin: Plugin = {
    onResultProcess({ request, result, serverContext }) {
      if (executed.has(request) || Array.isArray(result) || isIterable(result)) return;
      const context = serverContext as Observed & { req?: { id?: string } };
      record(
        request.method === 'GET' ? 'get' : 'post',
        'unknown',
        'rejected',
        { requestId: context.req?.id, operationName: context.params?.operationName },
        (result as ExecutionResult).errors,
      );
    },
  };

  return {
    plugin,
    httpPlugin,
    rejected(transport, requestId, operationName, errors, operationId) {
      record(transport, 'unknown', 'rejected', { requestId, operationId, operationName }, errors);
    },
  };
}
