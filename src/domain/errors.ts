/**
 * The error catalogue of the core. Every surface maps these codes to its own wire format
 * (HTTP status and body, GraphQL extensions.code, gRPC status, OAuth error). The core never
 * speaks HTTP; the tables that translate live beside each adapter.
 */
export type ErrorCode =
  | 'validation_error'
  | 'unprocessable'
  | 'not_found'
  | 'forbidden'
  | 'insufficient_scope'
  | 'unauthenticated'
  | 'invalid_api_key'
  | 'invalid_token'
  | 'token_expired'
  | 'conflict'
  | 'precondition_failed'
  | 'already_exists'
  | 'idempotency_key_reused'
  | 'idempotency_in_progress'
  | 'rate_limit_exceeded'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unavailable'
  | 'internal_error';

export interface ErrorDetail {
  field: string | null;
  message: string;
  code: string;
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** Extra facts a surface may expose (for example `retry_after`, `scope`). */
    readonly meta: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/**
 * Something shaped like an API key (`atr_live_<32 hex>_<6 hex>`, or most of one): given where an id
 * was expected (`atrium api-keys revoke <the key>`), it is the secret itself, and full keys are
 * never echoed or logged. Only its display prefix (`atr_live_1a2b3c`, what the store keeps) is shown.
 */
const KEY_LIKE = /atr_(?:test|live)_[0-9a-f]{6}/i;

export const notFound = (what: string, id?: string): DomainError => {
  if (id === undefined) return new DomainError('not_found', `${what} not found.`);
  const key = KEY_LIKE.exec(id);
  if (key)
    return new DomainError(
      'not_found',
      `${what} not found: the value given looks like an API key (${key[0]}...), not an id` +
        (what === 'API key' ? ' (an API key id starts with key_).' : '.'),
    );
  return new DomainError('not_found', `${what} ${id} not found.`);
};

export const forbidden = (message = 'You may not act on this resource.'): DomainError =>
  new DomainError('forbidden', message);

export const conflict = (message: string, meta: Record<string, unknown> = {}): DomainError =>
  new DomainError('conflict', message, [], meta);

/**
 * A write made on condition (the caller's precondition on the resource as it is now, such as "still
 * the version I read") whose condition is false: nothing was changed.
 */
export const preconditionFailed = (message: string): DomainError =>
  new DomainError('precondition_failed', message);

export function invalid(field: string | null, message: string, code = 'invalid'): DomainError {
  return new DomainError('validation_error', message, [{ field, message, code }]);
}

export function unprocessable(field: string | null, message: string, code: string): DomainError {
  return new DomainError('unprocessable', message, [{ field, message, code }]);
}

/** Collects field problems and throws them together, so a client sees every problem at once. */
export class Problems {
  readonly details: ErrorDetail[] = [];
  add(field: string | null, message: string, code = 'invalid'): this {
    this.details.push({ field, message, code });
    return this;
  }
  get empty(): boolean {
    return this.details.length === 0;
  }
  throwIfAny(
    message = 'The request has invalid fields.',
    code: 'validation_error' | 'unprocessable' = 'validation_error',
  ): void {
    if (!this.empty) throw new DomainError(code, message, this.details);
  }
}
