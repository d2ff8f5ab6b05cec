import { type DocumentNode, type ExecutionArgs, getOperationAST, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { SharedStateHealth } from '../../shared/health.js';
import type { SlidingWindowLimiter } from '../../shared/rate-limiter.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError } from '../errors.js';
import { operationCost } from './limits.js';

/** The spec's budget: 10,000 points per caller per sliding window, `retryAfter: 60` when spent. */
export const BUDGET_POINTS = 10_000;
/** The window the spec leaves open; 60 s so that `retryAfter: 60` is always enough to wait. */
export const BUDGET_WINDOW_SECONDS = 60;
export const BUDGET_RETRY_AFTER = 60;

const costs = new WeakMap<DocumentNode, Map<string, number>>();

/** Cost of the operation `args` runs, remembered per parsed (and cached) document. */
export function costOf(schema: GraphQLSchema, document: DocumentNode, operationName?: string | null): number {
  let byName = costs.get(document);
  if (!byName) costs.set(document, (byName = new Map()));
  const key = operationName ?? '';
  let cost = byName.get(key);
  if (cost === undefined) {
    const operation = getOperationAST(document, operationName);
    cost = operation ? operationCost(schema, document, operation) : 0;
    byName.set(key, cost);
  }
  return cost;
}

/**
 * Spends the operation's points from its caller's budget before anything executes. Returns the
 * RATE_LIMITED error when the points do not fit. When the budget's store cannot answer (Redis down
 * or silent) the operation runs unbudgeted, reported to `health` (component "complexity_budget")
 * as the REST limiter does.
 */
export async function spendBudget(
  limiter: SlidingWindowLimiter,
  logger: Logger,
  args: ExecutionArgs,
  health: SharedStateHealth,
): Promise<Error | undefined> {
  const context = args.contextValue as GraphQLContext;
  const cost = Math.max(1, costOf(args.schema, args.document, args.operationName));
  try {
    const decision = await limiter.hit(
      `gql:${context.budgetKey}`,
      BUDGET_POINTS,
      BUDGET_WINDOW_SECONDS,
      cost,
    );
    health.served('complexity_budget');
    if (decision.allowed) return undefined;
  } catch (err) {
    health.degraded(
      'complexity_budget',
      'GraphQL complexity budgets fail open (operations are not limited)',
      err,
      logger,
    );
    return undefined;
  }
  return graphQLError(
    'RATE_LIMITED',
    `This operation costs ${cost} points and the budget of ${BUDGET_POINTS} points per ${BUDGET_WINDOW_SECONDS} s is spent; retry in ${BUDGET_RETRY_AFTER} s.`,
    {
      retryAfter: BUDGET_RETRY_AFTER,
      cost,
      http: { status: 429, headers: { 'retry-after': String(BUDGET_RETRY_AFTER) } },
    },
  );
}
