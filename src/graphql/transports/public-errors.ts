import type { ExecutionResult, FormattedExecutionResult, GraphQLError, GraphQLFormattedError } from 'graphql';

/**
 * An error as a WebSocket or SSE client sees it. `extensions.http` is Yoga's instruction to its
 * HTTP layer (status, headers, whether the spec requires the status); POST and GET consume it, the
 * stream transports have no HTTP status per operation, so it stays on the server.
 */
export function publicError(error: GraphQLError): GraphQLFormattedError {
  const formatted = error.toJSON();
  if (!formatted.extensions || !('http' in formatted.extensions)) return formatted;
  const { http: _http, ...extensions } = formatted.extensions;
  return { ...formatted, extensions };
}

/** A result sent over WebSocket or SSE, its errors through publicError. */
export function publicResult(result: ExecutionResult): FormattedExecutionResult {
  if (!result.errors) return result as FormattedExecutionResult;
  return { ...result, errors: result.errors.map(publicError) } as FormattedExecutionResult;
}

/**
 * The body of a request error that happens before any operation is read (a transport refusing the
 * request as such), in the shape every GraphQL error has.
 */
export function requestErrorBody(message: string): string {
  return JSON.stringify({ errors: [{ message, extensions: { code: 'BAD_REQUEST' } }] });
}

/** 415 on /graphql and /graphql/stream: a POST body that is not JSON. */
export const UNSUPPORTED_MEDIA_TYPE = 'Unsupported Content-Type: send the POST body as application/json.';
