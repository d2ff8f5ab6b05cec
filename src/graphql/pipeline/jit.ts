import {
  BREAK,
  type DocumentNode,
  execute as graphqlExecute,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  getLocation,
  getOperationAST,
  getVariableValues,
  GraphQLError,
  Kind,
  type OperationDefinitionNode,
  subscribe as graphqlSubscribe,
  visit,
} from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import type { Plugin } from 'graphql-yoga';

/**
 * Queries run through graphql-jit: each document's operation is compiled once into a function and
 * reused, which spends markedly less CPU per request than graphql-js walking the document each time
 * (bench/README.md, "GraphQL"). The rules are untouched: this replaces only the execute step, after
 * parse, validation (depth, complexity, introspection) and the budget, and for every transport,
 * since WebSocket and SSE run the same enveloped execute.
 *
 * What stays with graphql-js: mutations (their fields run one after the other there, and they are
 * not the hot path), subscriptions, introspection, and any document graphql-jit declines to compile.
 * That is graphql's own `execute` and `subscribe`, not the executor Yoga brings
 * (@graphql-tools/executor): its `promiseForObject` writes each field into the response as it
 * resolves, so fields that resolve at once came before those that wait (`errors` before `post` in a
 * mutation payload, `id` before `organization`), against GraphQL §7.2.2, which orders a response
 * map as its selection set (until 2026-11-28). graphql-js and graphql-jit both keep that order.
 */
export function jitPlugin(): Plugin {
  return {
    onExecute({ args, setExecuteFn }) {
      const compiled = compiledFor(args);
      // The variables plugin before this one has already refused any bad variable.
      setExecuteFn(compiled ? (a) => runCompiled(compiled, a, false) : graphqlExecute);
    },
    onSubscribe({ setSubscribeFn }) {
      setSubscribeFn(graphqlSubscribe as never);
    },
  };
}

/** Runs `args` compiled when it can be compiled (see above), through `fallback` otherwise. */
export function executeCompiled(args: ExecutionArgs, fallback: Execute): unknown {
  const compiled = compiledFor(args);
  return compiled ? runCompiled(compiled, args, true) : fallback(args);
}

/** A compiled query with the operation it runs (its variable definitions are read per request). */
interface Compiled {
  query: CompiledQuery;
  operation: OperationDefinitionNode;
}

/** Compiled operations per parsed document (Yoga's parse cache hands out the same node per text). */
const compiledByDocument = new WeakMap<DocumentNode, Map<string, Compiled | null>>();

function compiledFor(args: ExecutionArgs): Compiled | null {
  let byName = compiledByDocument.get(args.document);
  if (!byName) compiledByDocument.set(args.document, (byName = new Map()));
  const key = args.operationName ?? '';
  let compiled = byName.get(key);
  if (compiled === undefined) {
    compiled = compile(args);
    byName.set(key, compiled);
  }
  return compiled;
}

function compile(args: ExecutionArgs): Compiled | null {
  const operation = getOperationAST(args.document, args.operationName);
  if (!operation || operation.operation !== 'query') return null;
  // Introspection is left to graphql-js, whose answers GraphiQL and the audits are written against.
  // Found by field name: `__typename`, which Apollo Client adds to every selection, is no reason.
  if (asksForSchema(args.document)) return null;
  const query = compileQuery(args.schema, args.document, args.operationName ?? undefined);
  return isCompiledQuery(query) ? { query, operation } : null;
}

function asksForSchema(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    [Kind.FIELD](node: FieldNode) {
      if (node.name.value === '__schema' || node.name.value === '__type') {
        found = true;
        return BREAK;
      }
      return undefined;
    },
  });
  return found;
}

type Execute = (args: ExecutionArgs) => unknown;

function runCompiled({ query, operation }: Compiled, args: ExecutionArgs, checkVariables: boolean): unknown {
  // Variables are coerced by graphql-js first so a bad one is refused in graphql-js's own words
  // (in the pipeline by ./variables.ts, before the budget); the compiled query then coerces the
  // same raw values again.
  if (checkVariables) {
    const coerced = getVariableValues(
      args.schema,
      operation.variableDefinitions ?? [],
      (args.variableValues ?? {}) as Record<string, unknown>,
      { maxErrors: 50 },
    );
    if (coerced.errors) return { errors: coerced.errors };
  }
  const result = query.query(args.rootValue, args.contextValue, args.variableValues ?? {});
  return isPromise(result)
    ? result.then((r) => asGraphQLJs(r, args.document))
    : asGraphQLJs(result, args.document);
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> =>
  typeof (value as Promise<T> | undefined)?.then === 'function';

/**
 * graphql-jit's errors carry locations but no AST nodes, and a failure of its own making (a null
 * in a non-null field) no original error. graphql-js locates every field error on its nodes with the
 * thrown error as `originalError`; the pipeline's masking and error mapping read exactly that, so
 * each error is rebuilt the way graphql-js would have made it.
 */
function asGraphQLJs(result: ExecutionResult, document: DocumentNode): ExecutionResult {
  if (!result.errors?.length) return result;
  return { ...result, errors: result.errors.map((e) => located(e, document)) };
}

function located(error: GraphQLError, document: DocumentNode): GraphQLError {
  const original = error.originalError;
  // graphql-js keeps an error a resolver threw that already names its path.
  if (original instanceof GraphQLError && Array.isArray(original.path)) return original;
  const nodes = nodesAt(document, error.locations ?? []);
  const own = original instanceof GraphQLError ? original : undefined;
  return new GraphQLError(original?.message ?? error.message, {
    nodes: own?.nodes ?? (nodes.length > 0 ? nodes : undefined),
    source: own?.source,
    positions: own?.positions,
    path: error.path,
    originalError: original ?? (error.path ? new Error(error.message) : undefined),
  });
}

const fieldsByPosition = new WeakMap<DocumentNode, Map<string, FieldNode>>();

function nodesAt(
  document: DocumentNode,
  locations: ReadonlyArray<{ line: number; column: number }>,
): FieldNode[] {
  let fields = fieldsByPosition.get(document);
  if (!fields) {
    const map = new Map<string, FieldNode>();
    const source = document.loc?.source;
    if (source) {
      visit(document, {
        [Kind.FIELD](node: FieldNode) {
          if (!node.loc) return;
          const { line, column } = getLocation(source, node.loc.start);
          map.set(`${line}:${column}`, node);
        },
      });
    }
    fieldsByPosition.set(document, (fields = map));
  }
  return locations.flatMap(({ line, column }) => {
    const node = fields.get(`${line}:${column}`);
    return node ? [node] : [];
  });
}
