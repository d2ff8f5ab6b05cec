import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, type ErrorCode, type ErrorDetail } from '../domain/errors.js';

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

/** Fastify's own 4xx errors (parsing, limits, validation) in the core's terms. */
function fromFastify(err: FastifyError): DomainError | undefined {
  if (err.validation) {
    const details = err.validation.map((v) => ajvDetail(v, err.validationContext));
    return new DomainError('validation_error', 'The request has invalid fields.', details, WIRE_NAMED);
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
  const code = KEYWORD_CODES[issue.keyword] ?? 'invalid';
  let message = issue.message ?? 'is invalid';
  if (issue.keyword === 'enum' && Array.isArray(issue.params.allowedValues)) {
    message = `must be one of ${(issue.params.allowedValues as unknown[]).join(', ')}`;
  }
  const where = field === '' ? (context ?? 'request') : field;
  return { field: field === '' ? null : field, message: `${where} ${message}`, code };
}

/** Marks errors whose field names already are REST's (they came from the request schema). */
const WIRE_NAMED = { wireNamed: true } as const;

/**
 * The core names fields by neutral paths in its own (camelCase) names: `shippingAddress.postalCode`,
 * `items[0].productId`. REST's wire names are snake_case: `shipping_address.postal_code`. Header
 * names (`Idempotency-Key`) and names already in snake_case are left as they are.
 */
export function restFieldName(path: string): string {
  return path.replace(/([a-z0-9])([A-Z])/g, (_m, a: string, b: string) => `${a}_${b.toLowerCase()}`);
}

/** A core message that starts with its field's path starts with the REST name instead. */
function renamed(message: string, field: string | null): string {
  if (field === null || !message.startsWith(field)) return message;
  return restFieldName(field) + message.slice(field.length);
}

function restDetails(err: DomainError): { message: string; details: ErrorDetail[] } {
  if (err.meta.wireNamed === true) return { message: err.message, details: err.details };
  const first = err.details[0]?.field ?? null;
  return {
    message: renamed(err.message, first),
    details: err.details.map((d) => ({
      ...d,
      field: d.field === null ? null : restFieldName(d.field),
      message: renamed(d.message, d.field),
    })),
  };
}

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
  return new DomainError(
    'internal_error',
    'An unexpected error occurred. Quote the request_id when reporting it.',
  );
}

export function errorBody(
  err: DomainError,
  requestId: string,
  upperCase = false,
): { status: number; body: ErrorBody } {
  const wire = HTTP[err.code];
  const { message, details } = restDetails(err);
  const body: ErrorBody = {
    error: upperCase ? wire.error.toUpperCase() : wire.error,
    message,
    request_id: requestId,
    details,
  };
  if (err.code === 'rate_limit_exceeded') {
    for (const k of ['limit', 'window_seconds', 'retry_after'] as const)
      if (k in err.meta) body[k] = err.meta[k];
  }
  return { status: wire.status, body };
}

/**
 * Sends an error in the spec's shape; 5xx are logged with their cause and never show it.
 * `upperCase` says which codes this API names in upper case (the user API's resource errors).
 */
export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  thrown: unknown,
  upperCase: (code: ErrorCode) => boolean = () => false,
): FastifyReply {
  const err = toDomainError(thrown);
  if (err.code === 'internal_error') request.log.error({ err: thrown }, 'unhandled error');
  const { status, body } = errorBody(err, String(request.id), upperCase(err.code));
  const www = err.meta.wwwAuthenticate;
  if (typeof www === 'string') reply.header('WWW-Authenticate', www);
  const headers = err.meta.headers;
  if (headers && typeof headers === 'object') reply.headers(headers as Record<string, string>);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}
