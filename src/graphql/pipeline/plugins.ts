import type { Plugin } from 'graphql-yoga';
import { type GraphQLError, NoSchemaIntrospectionCustomRule, parse } from 'graphql';
import type { Logger } from 'pino';
import type { SharedStateHealth } from '../../shared/health.js';
import type { SlidingWindowLimiter } from '../../shared/rate-limiter.js';
import { spendBudget } from './budget.js';
import { jitPlugin } from './jit.js';
import { complexityLimitRule, depthLimitRule, documentSizeError } from './limits.js';
import { noServiceSdlRule } from './schema-exposure.js';
import { variablesPlugin } from './variables.js';

/** A document of more tokens than this is refused while parsing (huge or padded documents). */
export const MAX_TOKENS = 20_000;

/**
 * The rules every operation passes, whatever its transport: these are envelop plugins, so they run
 * inside Yoga for POST and GET and inside `getEnveloped()` for WebSocket and SSE alike.
 *
 * - parse: bounded token count (Yoga caches parsed documents by text);
 * - validate: at most 1,000 field selections (before any rule runs), then depth ≤ 7 and
 *   complexity ≤ 1,000 beside graphql's own rules, and no introspection in
 *   production, federation's `_service { sdl }` included (whatever brought the document: a
 *   persisted hash included);
 * - execute / subscribe: the variables, coerced once for every executor (./variables.ts), then the
 *   caller's complexity budget, before any resolver runs; queries then run compiled by graphql-jit
 *   (./jit.ts), which relies on the variables having been checked.
 */
export function pipelinePlugins(options: {
  production: boolean;
  limiter: SlidingWindowLimiter;
  logger: Logger;
  /** Where a budget that could not be spent (Redis down) is reported: counted, and logged once per outage. */
  health: SharedStateHealth;
}): Plugin[] {
  const limits: Plugin = {
    onParse({ setParseFn }) {
      setParseFn((source, parseOptions) => parse(source, { ...parseOptions, maxTokens: MAX_TOKENS }));
    },
    onValidate({ params, addValidationRule, setResult }) {
      // Counted before any rule runs, so an oversized document costs one walk over its fields.
      const tooLarge = documentSizeError(params.documentAST);
      if (tooLarge) {
        setResult([tooLarge]);
        return;
      }
      addValidationRule(depthLimitRule());
      addValidationRule(complexityLimitRule());
      if (options.production) {
        addValidationRule(NoSchemaIntrospectionCustomRule);
        addValidationRule(noServiceSdlRule);
      }
    },
  };
  const budget: Plugin = {
    async onExecute({ args, setResultAndStopExecution }) {
      const refusal = await spendBudget(options.limiter, options.logger, args, options.health);
      if (refusal) setResultAndStopExecution({ errors: [refusal as GraphQLError] });
    },
    async onSubscribe({ args, setResultAndStopExecution }) {
      const refusal = await spendBudget(options.limiter, options.logger, args, options.health);
      if (refusal) setResultAndStopExecution({ errors: [refusal as GraphQLError] });
    },
  };
  // Last: it only replaces how a query executes, once the rules above have let it through.
  return [limits, variablesPlugin(), budget, jitPlugin()];
}
