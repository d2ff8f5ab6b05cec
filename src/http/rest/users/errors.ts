import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../../../domain/errors.js';
import { sendError, type ErrorDialect } from '../../errors.js';

/**
 * The user API (every path under `/v1/users` and `/v1/organizations`) names its resource and
 * request errors in upper case (`NOT_FOUND`, `VALIDATION_ERROR`, `FORBIDDEN`, `CONFLICT`,
 * `PAYLOAD_TOO_LARGE`, `UNSUPPORTED_MEDIA_TYPE`, `METHOD_NOT_ALLOWED`), whether a handler or the
 * body parser raised them. Errors of the caller step shared by every API keep the codes the spec
 * gives them everywhere (`invalid_api_key`, `invalid_token`, `insufficient_scope`,
 * `rate_limit_exceeded`), so one client handles credentials and limits the same on every route.
 */
const UPPER_CASE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'validation_error',
  'unprocessable',
  'not_found',
  'forbidden',
  'conflict',
  'already_exists',
  'payload_too_large',
  'unsupported_media_type',
]);

export const USER_API_DIALECT: ErrorDialect = {
  prefixes: ['/v1/users', '/v1/organizations'],
  upperCase: (code) => UPPER_CASE.has(code),
};

export function userApiErrorHandler(thrown: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return sendError(request, reply, thrown, USER_API_DIALECT.upperCase);
}
