import {
  type DocumentNode,
  type ExecutionArgs,
  getOperationAST,
  getVariableValues,
  GraphQLError,
  type VariableDefinitionNode,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * Variables are coerced here, once, before the budget and before any executor: graphql-jit
 * (queries) and Yoga's executor (mutations, subscriptions, introspection) each used to refuse a bad
 * variable their own way (jit: 200 and no code; the executor: 400 and no code for a query or
 * mutation, BAD_USER_INPUT for a subscription). Every refusal is now the executor's words with
 * `extensions.code: BAD_USER_INPUT` and HTTP 400 (the transports that are not HTTP drop the status),
 * whatever executes the operation and on every transport. A refused operation spends no budget.
 */
export function variablesPlugin(): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const errors = variableErrors(args);
      if (errors) setResultAndStopExecution({ errors });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const errors = variableErrors(args);
      if (errors) setResultAndStopExecution({ errors });
    },
  };
}

/** Variable definitions per parsed document and operation name (Yoga caches parsed documents). */
const definitionsByDocument = new WeakMap<DocumentNode, Map<string, readonly VariableDefinitionNode[]>>();

function definitionsOf(args: ExecutionArgs): readonly VariableDefinitionNode[] {
  let byName = definitionsByDocument.get(args.document);
  if (!byName) definitionsByDocument.set(args.document, (byName = new Map()));
  const key = args.operationName ?? '';
  let definitions = byName.get(key);
  if (definitions === undefined) {
    // No operation by that name: left to the executor, which says so in its own words.
    definitions = getOperationAST(args.document, args.operationName)?.variableDefinitions ?? [];
    byName.set(key, definitions);
  }
  return definitions;
}

/** The refusals of `args`' variables, or undefined when they coerce. */
export function variableErrors(args: ExecutionArgs): GraphQLError[] | undefined {
  const definitions = definitionsOf(args);
  if (definitions.length === 0) return undefined;
  const coerced = getVariableValues(
    args.schema,
    definitions,
    (args.variableValues ?? {}) as Record<string, unknown>,
    { maxErrors: 50 },
  );
  if (!coerced.errors) return undefined;
  return coerced.errors.map(
    (error) =>
      new GraphQLError(error.message, {
        nodes: error.nodes,
        source: error.source,
        positions: error.positions,
        originalError: error.originalError,
        extensions: { ...error.extensions, code: 'BAD_USER_INPUT', http: { status: 400 } },
      }),
  );
}
