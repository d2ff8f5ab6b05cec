import { GraphQLError } from 'graphql';
import { DomainError, type ErrorCode } from '../domain/errors.js';
import { STORE_RETRY_AFTER_SECONDS, STORE_UNAVAILABLE_MESSAGE } from '../store/errors.js';

/**
 * The GraphQL `extensions.code` values Atrium answers. The first five are the core's catalogue seen
 * through GraphQL; the persisted-query and limit codes are raised by the pipeline itself.
 */
export type GraphQLErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'BAD_USER_INPUT'
  | 'CONFLICT'
  | 'RATE_LIMITED'
  | 'PERSISTED_QUERY_NOT_FOUND'
  | 'PERSISTED_QUERY_REQUIRED'
  | 'GRAPHQL_VALIDATION_FAILED'
  | 'GRAPHQL_PARSE_FAILED'
  | 'PAYLOAD_TOO_LARGE'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_SERVER_ERROR';

/** The one table: each core error code and the GraphQL code it answers with. */
export const GRAPHQL_CODE: Record<ErrorCode, GraphQLErrorCode> = {
  validation_error: 'BAD_USER_INPUT',
  unprocessable: 'BAD_USER_INPUT',
  not_found: 'NOT_FOUND',
  forbidden: 'FORBIDDEN',
  insufficient_scope: 'FORBIDDEN',
  unauthenticated: 'UNAUTHENTICATED',
  invalid_api_key: 'UNAUTHENTICATED',
  invalid_token: 'UNAUTHENTICATED',
  token_expired: 'UNAUTHENTICATED',
  conflict: 'CONFLICT',
  precondition_failed: 'CONFLICT',
  already_exists: 'CONFLICT',
  idempotency_key_reused: 'BAD_USER_INPUT',
  idempotency_in_progress: 'CONFLICT',
  rate_limit_exceeded: 'RATE_LIMITED',
  payload_too_large: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'BAD_USER_INPUT',
  unavailable: 'SERVICE_UNAVAILABLE',
  internal_error: 'INTERNAL_SERVER_ERROR',
};

/** A GraphQL error with Atrium's code; every error the schema or the pipeline raises goes through here. */
export function graphQLError(
  code: GraphQLErrorCode,
  message: string,
  extensions: Record<string, unknown> = {},
): GraphQLError {
  return new GraphQLError(message, { extensions: { ...extensions, code } });
}

/**
 * Turns a thrown core error into the GraphQL error a client sees. Facts a client needs are carried
 * over (`retryAfter` for RATE_LIMITED, the required `scope`, field `details` for BAD_USER_INPUT);
 * anything that is not a DomainError is returned unchanged so the pipeline's masking decides about it.
 */
export function toGraphQLError(err: unknown): unknown {
  if (err instanceof GraphQLError) {
    if (err.originalError instanceof DomainError) return fromDomain(err.originalError, err);
    return err;
  }
  if (err instanceof DomainError) return fromDomain(err);
  return err;
}

function fromDomain(err: DomainError, located?: GraphQLError): GraphQLError {
  const code = GRAPHQL_CODE[err.code];
  const extensions: Record<string, unknown> = { code };
  if (code === 'RATE_LIMITED') extensions.retryAfter = Number(err.meta.retry_after ?? 60);
  if (typeof err.meta.scope === 'string') extensions.scope = err.meta.scope;
  if (err.details.length > 0)
    extensions.details = err.details.map((d) => ({ field: d.field, message: d.message }));
  const message = code === 'INTERNAL_SERVER_ERROR' ? 'Unexpected error.' : err.message;
  return new GraphQLError(message, {
    nodes: located?.nodes,
    source: located?.source,
    positions: located?.positions,
    path: located?.path,
    extensions,
  });
}

/**
 * The database cannot be reached (a restart, a failover): the one answer for it, wherever GraphQL
 * meets it (a resolver mid-operation, the credential check). SERVICE_UNAVAILABLE, not a masked
 * INTERNAL_SERVER_ERROR, because retrying helps: REST's fixed message and its `Retry-After` as
 * `retryAfter`, the extension RATE_LIMITED already uses for the same advice; never storage text.
 * `located` keeps a field error at its path; `http` is for a refusal before execution (the status
 * and headers Yoga gives it).
 */
export function storeUnavailableError(
  located?: GraphQLError,
  http?: { status: number; headers: Record<string, string> },
): GraphQLError {
  return new GraphQLError(STORE_UNAVAILABLE_MESSAGE, {
    nodes: located?.nodes,
    source: located?.source,
    positions: located?.positions,
    path: located?.path,
    extensions: {
      code: 'SERVICE_UNAVAILABLE',
      retryAfter: STORE_RETRY_AFTER_SECONDS,
      ...(http ? { http } : {}),
    },
  });
}

/** Calls a core operation and rethrows its DomainError as a GraphQL error with the mapped code. */
export async function viaCore<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw toGraphQLError(err);
  }
}

export const unauthenticated = (): GraphQLError =>
  graphQLError('UNAUTHENTICATED', 'Authentication required: send X-API-Key or Authorization: Bearer.');

export const badUserInput = (message: string, field?: string): GraphQLError =>
  graphQLError('BAD_USER_INPUT', message, field === undefined ? {} : { field });

/**
 * An error Fastify raises on a GraphQL path before GraphQL runs (a body over BODY_LIMIT_BYTES: 413)
 * as a GraphQL response, `{ errors: [{ message, extensions: { code } }] }`, not REST's body: what a
 * GraphQL client parses, and what nginx answers for a body over its own limit on /graphql
 * (src/cluster/nginx-errors.ts), so a client meets one shape whichever limit a body crosses.
 */
export function graphQLErrorBody(err: DomainError, rest: { message: string }): unknown {
  // 415 is a refusal of the request as such, BAD_REQUEST as Yoga codes its own 415 on /graphql.
  const code = err.code === 'unsupported_media_type' ? 'BAD_REQUEST' : GRAPHQL_CODE[err.code];
  const message = code === 'INTERNAL_SERVER_ERROR' ? 'Unexpected error.' : rest.message;
  const extensions: Record<string, unknown> = { code };
  // A body that is not UTF-8 names what is wrong as a variable's bad text does (fromDomain).
  if (code === 'BAD_USER_INPUT' && err.details.length > 0)
    extensions.details = err.details.map((d) => ({ field: d.field, message: d.message }));
  return { errors: [{ message, extensions }] };
}
