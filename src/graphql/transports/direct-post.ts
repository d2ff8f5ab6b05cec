import type { FastifyReply, FastifyRequest } from 'fastify';
import { processRegularResult } from 'graphql-yoga';
import { requestScopeOf } from '../../http/plugins/request-context.js';
import type { OperationParams } from '../pipeline/persisted.js';
import type { GraphQLPipeline } from '../pipeline/pipeline.js';

/**
 * The common request, answered without Yoga's Fetch layer: a POST of `application/json` from a
 * client that accepts JSON, carrying one operation that passes every rule. Yoga would turn it into a
 * Fetch Request, read the body again through a stream, run its request plugins and build a Response;
 * for issue 7's benchmark query that was about a tenth of Atrium's CPU per request
 * (bench/README.md). The operation itself runs through the same envelop plugins
 * (`pipeline.executeDirect`), and the answer is built by Yoga's own `processRegularResult`, so its
 * status, headers and body are Yoga's.
 *
 * Anything else goes to Yoga as before: other media types or Accept values, a browser's
 * cross-origin request (Yoga adds CORS headers), a body that is not one plain operation object, and
 * every request refused before execution, so each refusal keeps Yoga's status and wording.
 */
export function directPost(pipeline: GraphQLPipeline) {
  return async function answer(req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const accepted = acceptedMediaType(req.headers.accept);
    if (accepted === undefined || req.headers.origin !== undefined) return false;
    if (!isJson(req.headers['content-type'])) return false;
    const params = operationParams(req.body);
    if (params === undefined) return false;
    const result = await pipeline.executeDirect(params, { req, reply }, requestScopeOf(req));
    if (result === undefined) return false;
    // Past the deadline the request was answered 503 meanwhile: this send then goes nowhere
    // (request-context.ts, dropLateAnswers).
    const response = processRegularResult(result, pipeline.yoga.fetchAPI, accepted);
    response.headers.forEach((value, key) => void reply.header(key, value));
    reply.status(response.status);
    reply.send(await response.text());
    return true;
  };
}

/**
 * The media type Yoga would answer with, for the Accept values clients send most; undefined for any
 * other value (Yoga then negotiates it). No Accept and `*\/*` are application/json in Yoga, and
 * Apollo Client's list prefers application/graphql-response+json.
 */
const ACCEPTED = new Map<string | undefined, string>([
  [undefined, 'application/json'],
  ['*/*', 'application/json'],
  ['application/json', 'application/json'],
  ['application/graphql-response+json', 'application/graphql-response+json'],
  ['application/graphql-response+json, application/json;q=0.9', 'application/graphql-response+json'],
  ['application/graphql-response+json,application/json;q=0.9', 'application/graphql-response+json'],
]);

export function acceptedMediaType(accept: string | undefined): string | undefined {
  return ACCEPTED.get(accept);
}

function isJson(contentType: string | undefined): boolean {
  return contentType === 'application/json' || contentType === 'application/json; charset=utf-8';
}

const KEYS = new Set(['query', 'operationName', 'variables', 'extensions']);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The body as one operation, when it is exactly what Yoga's parameter checks accept without a word:
 * a JSON object of the four known members with their types. Undefined otherwise (Yoga answers).
 */
export function operationParams(body: unknown): OperationParams | undefined {
  if (!Buffer.isBuffer(body) || body.length === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isObject(parsed)) return undefined;
  for (const key of Object.keys(parsed)) if (!KEYS.has(key)) return undefined;
  const { query, operationName, variables, extensions } = parsed;
  if (query !== undefined && typeof query !== 'string') return undefined;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string')
    return undefined;
  if (variables !== undefined && variables !== null && !isObject(variables)) return undefined;
  if (extensions !== undefined && !isObject(extensions)) return undefined;
  return parsed as OperationParams;
}
