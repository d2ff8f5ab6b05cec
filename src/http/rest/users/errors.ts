import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../../../domain/errors.js';
import { sendError } from '../../errors.js';

/**
 * The user API names its resource errors in upper case (`NOT_FOUND`, `VALIDATION_ERROR`,
 * `FORBIDDEN`, `CONFLICT`). Errors of the caller step shared by every API keep the codes the spec
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
]);

export function userApiErrorHandler(thrown: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return sendError(request, reply, thrown, (code) => UPPER_CASE.has(code));
}
