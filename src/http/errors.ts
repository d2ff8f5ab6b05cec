import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, type ErrorCode, type ErrorDetail } from '../domain/errors.js';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS, STORE_UNAVAILABLE_MESSAGE } from '../store/errors.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import { PATTERN_REFUSALS } from './rest/common-schemas.js';
import { restDetails } from './rest/field-names.js';

/** A client gets at most this many field problems; the rest are counted, not listed. */
export const MAX_DETAILS = 20;

/** How each core error code looks on the REST wire. */
const HTTP: Record<ErrorCode, { status: number; error: string }> = {
  validation_error: { status: 400, error: 'validation_error' },
  unprocessable: { status: 422, error: 'validation_error' },
  not_found: { status: 404, error: 'not_found' },
  forbidden: { status: 403, error: 'forbidden' },
  insufficient_scope: { status: 403, error: 'insufficient_scope' },
  unauthenticated: { status: 401, error: 'invalid_token' },
  invalid_api_key: { status: 401, error: 'invalid_api_key' },
  invalid_token: { status: 401, error: 'invalid_token' },
  token_expired: { status: 401, error: 'token_expired' },
  conflict: { status: 409, error: 'conflict' },
  precondition_failed: { status: 412, error: 'precondition_failed' },
  already_exists: { status: 409, error: 'conflict' },
  idempotency_key_reused: { status: 422, error: 'idempotency_key_reused' },
  idempotency_in_progress: { status: 409, error: 'idempotency_in_progress' },
  rate_limit_exceeded: { status: 429, error: 'rate_limit_exceeded' },
  payload_too_large: { status: 413, error: 'payload_too_large' },
  unsupported_media_type: { status: 415, error: 'unsupported_media_type' },
  unavailable: { status: 503, error: 'service_unavailable' },
  internal_error: { status: 500, error: 'internal_error' },
};

export interface ErrorBody {
  error: string;
  message: string;
  request_id: string;
  details: ErrorDetail[];
  [extra: string]: unknown;
}

export function httpStatusOf(code: ErrorCode): number {
  return HTTP[code].status;
}

/**
 * 4xx statuses the core has no code for, raised by Fastify, its plugins or Node's HTTP parser (a
 * static file outside its root, a bad Range, an unknown Expect). The status is kept and named:
 * a client's mistake is never a 500.
 */
const HTTP_ONLY: Record<number, string> = {
  400: 'bad_request',
  403: 'forbidden',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  408: 'request_timeout',
  411: 'length_required',
  416: 'range_not_satisfiable',
  417: 'expectation_failed',
  431: 'request_header_fields_too_large',
};

function keepStatus(status: number): DomainError {
  const reason = STATUS_CODES[status] ?? 'Client Error';
  return new DomainError('validation_error', `The request was refused: ${reason}.`, [], {
    status,
    error: HTTP_ONLY[status] ?? 'bad_request',
  });
}

/** Fastify's own 4xx errors (parsing, limits, validation) in the core's terms. */
function fromFastify(err: FastifyError): DomainError | undefined {
  if (err.validation) {
    // A path segment left empty (`/api/v2/orders/`, a trailing slash) names no resource: the same
    // 404 as any path that matches no route, not a field error about an id nobody typed.
    if (
      err.validationContext === 'params' &&
      err.validation.some((v) => v.keyword === 'minLength' && v.params.limit === 1)
    ) {
      return new DomainError('not_found', 'No such route or resource.');
    }
    // Only what will be shown is described; a body of 50,000 unknown keys costs no more than 20.
    const details = err.validation.slice(0, MAX_DETAILS).map((v) => ajvDetail(v, err.validationContext));
    const omitted = Math.max(0, err.validation.length - MAX_DETAILS);
    return new DomainError('validation_error', 'The request has invalid fields.', details, {
      ...WIRE_NAMED,
      omittedDetails: omitted,
    });
  }
  const status = err.statusCode ?? 500;
  if (status === 413)
    return new DomainError('payload_too_large', 'The request body is larger than the limit.');
  if (status === 415) {
    return new DomainError(
      'unsupported_media_type',
      'The request content type is not supported; send application/json.',
    );
  }
  if (status === 400) {
    const json = err instanceof SyntaxError || /JSON/i.test(err.code ?? '') || /JSON/.test(err.message);
    return new DomainError(
      'validation_error',
      json ? 'The request body is not valid JSON.' : 'The request is malformed.',
      [
        {
          field: null,
          message: json ? 'malformed JSON' : err.message,
          code: json ? 'invalid_json' : 'malformed_request',
        },
      ],
    );
  }
  // A path segment longer than any id can be (414 from the router) names nothing that exists.
  if (status === 404 || status === 414) return new DomainError('not_found', 'No such route or resource.');
  if (status >= 400 && status < 500) return keepStatus(status);
  return undefined;
}

interface AjvIssue {
  instancePath?: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

const KEYWORD_CODES: Record<string, string> = {
  enum: 'invalid_enum',
  const: 'invalid_enum',
  minimum: 'range_error',
  maximum: 'range_error',
  exclusiveMinimum: 'range_error',
  exclusiveMaximum: 'range_error',
  minItems: 'range_error',
  maxItems: 'range_error',
  minProperties: 'range_error',
  maxProperties: 'range_error',
  minLength: 'range_error',
  maxLength: 'range_error',
  required: 'required',
  type: 'invalid_type',
  format: 'invalid_format',
  pattern: 'invalid_format',
  additionalProperties: 'unknown_field',
};

function ajvDetail(issue: AjvIssue, context: string | undefined): ErrorDetail {
  const segments = (issue.instancePath ?? '').split('/').filter((s) => s !== '');
  if (issue.keyword === 'required' && typeof issue.params.missingProperty === 'string')
    segments.push(issue.params.missingProperty);
  if (issue.keyword === 'additionalProperties' && typeof issue.params.additionalProperty === 'string') {
    segments.push(issue.params.additionalProperty);
  }
  const field = segments.reduce((acc, s) => (/^\d+$/.test(s) ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '');
  let code = KEYWORD_CODES[issue.keyword] ?? 'invalid';
  let message = issue.message ?? 'is invalid';
  if (issue.keyword === 'enum' && Array.isArray(issue.params.allowedValues)) {
    message = `must be one of ${(issue.params.allowedValues as unknown[]).join(', ')}`;
  }
  const refusal =
    issue.keyword === 'pattern' && typeof issue.params.pattern === 'string'
      ? PATTERN_REFUSALS.get(issue.params.pattern)
      : undefined;
  if (refusal) ({ message, code } = refusal);
  const where = field === '' ? (context ?? 'request') : field;
  return { field: field === '' ? null : field, message: `${where} ${message}`, code };
}

/** Marks errors whose field names already are REST's (they came from the request schema). */
const WIRE_NAMED = { wireNamed: true } as const;

/** Converts anything thrown into the core's error; unknown errors become a masked internal_error. */
export function toDomainError(err: unknown): DomainError {
  if (err instanceof DomainError) return err;
  const fe = err as FastifyError;
  if (
    fe &&
    typeof fe === 'object' &&
    (fe.validation || (fe.statusCode !== undefined && fe.statusCode < 500))
  ) {
    const mapped = fromFastify(fe);
    if (mapped) return mapped;
  }
  if (isStoreUnavailable(err)) return storeUnavailable();
  return new DomainError(
    'internal_error',
    'An unexpected error occurred. Quote the request_id when reporting it.',
  );
}

/** The database is restarting or unreachable: the client may retry, so a 503 with Retry-After. */
export function storeUnavailable(): DomainError {
  return new DomainError('unavailable', STORE_UNAVAILABLE_MESSAGE, [], {
    headers: { 'retry-after': String(STORE_RETRY_AFTER_SECONDS) },
  });
}

export function errorBody(
  err: DomainError,
  requestId: string,
  upperCase = false,
): { status: number; body: ErrorBody } {
  const wire = HTTP[err.code];
  const status = typeof err.meta.status === 'number' ? err.meta.status : wire.status;
  const error = typeof err.meta.error === 'string' ? err.meta.error : wire.error;
  const { message, details: named } = restDetails(err);
  const omitted =
    (typeof err.meta.omittedDetails === 'number' ? err.meta.omittedDetails : 0) +
    Math.max(0, named.length - MAX_DETAILS);
  const details = named.slice(0, MAX_DETAILS);
  if (omitted > 0) {
    details.push({
      field: null,
      message: `${omitted} more problem${omitted === 1 ? '' : 's'} not listed; fix these first.`,
      code: 'more_problems',
    });
  }
  const body: ErrorBody = {
    error: upperCase ? error.toUpperCase() : error,
    message,
    request_id: requestId,
    details,
  };
  if (err.code === 'rate_limit_exceeded') {
    for (const k of ['limit', 'window_seconds', 'retry_after'] as const)
      if (k in err.meta) body[k] = err.meta[k];
  }
  return { status, body };
}

/** An API that names some error codes in upper case, by the paths it serves. */
export interface ErrorDialect {
  prefixes: readonly string[];
  upperCase: (code: ErrorCode) => boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Registered by the APIs that need one; read by sendError for every error on their paths. */
    errorDialects: ErrorDialect[];
    /** The process's database outage log (`Services.storeOutage`; see `loggedAsOutage`). */
    storeOutage: StoreOutageLog;
  }
}

/**
 * The rule for a request answered 503 because the database cannot be reached, on every HTTP
 * surface: the outage is logged once (a warning with the driver's message and code, no stack) and
 * its end once, not once per request (the token server used to log an error with a stack for
 * every token request of an outage). The log is the process's, so GraphQL and gRPC meeting the same
 * outage add no line of their own. True when `thrown` is such a failure (logged, or counted when
 * already logged); false for anything else, which the caller logs in full as before.
 */
export function loggedAsOutage(request: FastifyRequest, thrown: unknown): boolean {
  return request.server.storeOutage.unreachable(thrown);
}

/**
 * Declares that errors on these paths use an API's own case, whoever raises them: its handlers,
 * the router (a bad URL encoding), the not-found handler, a hook. Paths, not route scopes, because
 * the router's errors happen before any route, and so any scope, is known.
 */
export function registerErrorDialect(app: FastifyInstance, dialect: ErrorDialect): void {
  app.errorDialects.push(dialect);
}

function dialectOf(request: FastifyRequest): ((code: ErrorCode) => boolean) | undefined {
  const dialects = request.server?.errorDialects;
  if (!dialects || dialects.length === 0) return undefined;
  const path = (request.raw.url ?? request.url ?? '').split('?', 1)[0]!;
  for (const d of dialects) {
    if (d.prefixes.some((p) => path === p || path.startsWith(`${p}/`))) return d.upperCase;
  }
  return undefined;
}

/** An API whose errors are not REST's body (GraphQL) turns the REST body into its own. */
export type ErrorShape = (err: DomainError, body: ErrorBody) => unknown;

/**
 * Sends an error in the spec's shape; 5xx are logged with their cause and never show it.
 * `upperCase` says which codes this API names in upper case; by default the dialect registered
 * for the request's path (the user API's resource errors). `shape`, when given, writes the body.
 */
export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  thrown: unknown,
  upperCase: ((code: ErrorCode) => boolean) | undefined = dialectOf(request),
  shape?: ErrorShape,
): FastifyReply {
  const err = toDomainError(thrown);
  if (err.code === 'internal_error') request.log.error({ err: thrown }, 'unhandled error');
  else if (err.code === 'unavailable' && !(thrown instanceof DomainError)) loggedAsOutage(request, thrown);
  const { status, body } = errorBody(err, String(request.id), upperCase?.(err.code) ?? false);
  const www = err.meta.wwwAuthenticate;
  if (typeof www === 'string') reply.header('WWW-Authenticate', www);
  const headers = err.meta.headers;
  if (headers && typeof headers === 'object') reply.headers(headers as Record<string, string>);
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(shape ? shape(err, body) : body);
}
