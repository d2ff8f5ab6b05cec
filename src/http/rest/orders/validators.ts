import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Order } from '../../../domain/order-model.js';
import { orderValidatorsOf, preconditionHolds, type Validators } from '../../../domain/order-conditions.js';
import type { OrderWriteOptions } from '../../../domain/orders.js';
import { headerText } from './common.js';
import type { ApiVersion } from './versions.js';

/**
 * The validators of an order in one version's representation: the ETag and Last-Modified a GET of
 * it hands out, and what a conditional write of it is compared with. v1 and v2 represent an order
 * differently, so their tags differ; a write is compared in the version it was sent to.
 */
export function orderValidators(version: ApiVersion, order: Order): Validators & { body: unknown } {
  const body = version.order(order);
  return { body, ...orderValidatorsOf(order, body) };
}

/**
 * The request's If-Match and If-Unmodified-Since as the core's precondition on the order. The core
 * evaluates it on the order as it reads it for the write, in the write's transaction, and refuses
 * the write (412 precondition_failed) when it is false. No condition headers: no precondition.
 */
export function conditionalWrite(request: FastifyRequest, version: ApiVersion): OrderWriteOptions {
  const conditions = {
    ifMatch: headerText(request, 'if-match'),
    ifUnmodifiedSince: headerText(request, 'if-unmodified-since'),
  };
  if (conditions.ifMatch === undefined && conditions.ifUnmodifiedSince === undefined) return {};
  return { precondition: (current) => preconditionHolds(conditions, orderValidators(version, current)) };
}

/**
 * The order's representation for a 200 answer, with the ETag and Last-Modified of that
 * representation, so a client's next conditional write needs no GET first.
 */
export function withValidators(reply: FastifyReply, version: ApiVersion, order: Order): unknown {
  const { body, etag, lastModified } = orderValidators(version, order);
  reply.header('etag', etag);
  reply.header('last-modified', lastModified.toUTCString());
  return body;
}
