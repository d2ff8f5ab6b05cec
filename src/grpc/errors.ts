import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { DomainError, type ErrorCode } from '../domain/errors.js';
import { STORE_RETRY_AFTER_SECONDS, STORE_UNAVAILABLE_MESSAGE } from '../store/errors.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import { encodeStatus, STATUS_DETAILS_KEY } from './status-details.js';

/**
 * The one table from the core's error catalogue to gRPC status codes. A new core code does not
 * compile until it has a row here.
 */
export const GRPC_STATUS: Readonly<Record<ErrorCode, status>> = {
  validation_error: status.INVALID_ARGUMENT,
  unprocessable: status.INVALID_ARGUMENT,
  unsupported_media_type: status.INVALID_ARGUMENT,
  idempotency_key_reused: status.INVALID_ARGUMENT,
  not_found: status.NOT_FOUND,
  forbidden: status.PERMISSION_DENIED,
  insufficient_scope: status.PERMISSION_DENIED,
  unauthenticated: status.UNAUTHENTICATED,
  invalid_api_key: status.UNAUTHENTICATED,
  invalid_token: status.UNAUTHENTICATED,
  token_expired: status.UNAUTHENTICATED,
  already_exists: status.ALREADY_EXISTS,
  conflict: status.FAILED_PRECONDITION,
  precondition_failed: status.FAILED_PRECONDITION,
  idempotency_in_progress: status.ABORTED,
  rate_limit_exceeded: status.RESOURCE_EXHAUSTED,
  payload_too_large: status.RESOURCE_EXHAUSTED,
  unavailable: status.UNAVAILABLE,
  internal_error: status.INTERNAL,
};

/** What an unexpected failure (storage, a bug) answers: the cause goes to the log, never the wire. */
export const INTERNAL_MESSAGE = 'Internal error; the request id in the trailers identifies it in the logs.';

/**
 * A thrown value as the gRPC status the client receives. DomainErrors keep their message (written
 * for clients) and their field details as google.rpc.BadRequest; anything else is masked. `outage`
 * is the process's database outage log (`Services.storeOutage`), shared with HTTP and GraphQL.
 */
export function toServiceError(
  err: unknown,
  base: Metadata,
  log: Logger,
  outage: Pick<StoreOutageLog, 'unreachable'>,
): ServiceError {
  // The request id and any rate-limit facts already gathered go out as trailers.
  const metadata = base.clone();
  // A status the pipeline chose itself (UNAVAILABLE while draining) goes out as it is, with the trailers.
  if (err instanceof Error && (err as Partial<ServiceError>).metadata instanceof Metadata) {
    const chosen = err as ServiceError;
    for (const [name, value] of Object.entries(chosen.metadata.getMap())) metadata.set(name, value);
    return serviceError(chosen.code, chosen.details, metadata);
  }
  // The database is restarting or unreachable (authentication included, which reads the store):
  // a storage failure, so INTERNAL, as the spec's gRPC rule 3 says. Its fixed message and a
  // `retry-after` trailer (as REST's 503 has the header) tell the client this one is worth
  // retrying, with no storage text. The driver's words go to the log once per outage, under the
  // rule every surface of the process follows, not once per call.
  if (outage.unreachable(err)) {
    metadata.set('retry-after', String(STORE_RETRY_AFTER_SECONDS));
    return serviceError(status.INTERNAL, STORE_UNAVAILABLE_MESSAGE, metadata);
  }
  if (!(err instanceof DomainError)) {
    log.error({ err }, 'grpc call failed');
    return serviceError(status.INTERNAL, INTERNAL_MESSAGE, metadata);
  }
  const code = GRPC_STATUS[err.code];
  const meta = err.meta as { retry_after?: unknown; headers?: Record<string, string>; scope?: unknown };
  // The rate limiter's facts (x-ratelimit-*, retry-after) travel as trailers, as headers do over HTTP.
  for (const [name, value] of Object.entries(meta.headers ?? {})) metadata.set(name, value);
  if (code === status.INVALID_ARGUMENT && err.details.length > 0) {
    const fieldViolations = err.details.map((d) => ({
      field: d.field === null ? '' : protoFieldName(d.field),
      description: d.message,
      reason: d.code,
    }));
    metadata.set(STATUS_DETAILS_KEY, encodeStatus({ code, message: err.message, fieldViolations }));
  }
  return serviceError(code, err.message, metadata);
}

export function serviceError(code: status, details: string, metadata = new Metadata()): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata });
}

/**
 * The core names fields by neutral camelCase paths (`shippingAddress.postalCode`); the wire names
 * them as the proto does, in snake_case (`shipping_address.postal_code`). Snake_case passes as is.
 */
export function protoFieldName(path: string): string {
  return path.replace(/([a-z0-9])([A-Z])/g, (_m, a: string, b: string) => `${a}_${b.toLowerCase()}`);
}
