import { standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { createInput, patchInput } from './input.js';
import {
  ConditionalWriteHeaders,
  CreateOrderRequestSchema,
  errorResponse,
  NoContent,
  ORDER_VALIDATOR_HEADERS,
  OrderParams,
  PatchOrderRequestSchema,
  preconditionFailedResponse,
} from './schemas.js';
import { conditionalWrite, withValidators } from './validators.js';

const notFound = errorResponse('No order with this id.');
const stateConflict = errorResponse('The order is in a state that forbids this change (conflict).');
const preconditionFailed = preconditionFailedResponse();
const CONDITIONS =
  ' With If-Match (or, without it, If-Unmodified-Since) the change is made only if the order is still ' +
  'the one the condition names, checked in the same transaction as the write; otherwise 412.';

/** PATCH, PUT and DELETE on one order. */
export function registerWrite({ app, services, version }: RouteContext): void {
  const path = `${version.prefix}/orders/:order_id`;

  app.patch(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'updateOrder',
          'Update an order',
          'currency, shipping_address and coupon_code change while the order is PENDING. status: an admin ' +
            'moves it forward one step (PENDING, PROCESSING, SHIPPED, DELIVERED); CANCELLED cancels it ' +
            'like POST .../cancel. Setting the current status again changes nothing.' +
            CONDITIONS,
        ),
        params: OrderParams,
        headers: ConditionalWriteHeaders,
        body: PatchOrderRequestSchema,
        response: {
          200: {
            ...version.orderSchema,
            description: 'The updated order.',
            headers: ORDER_VALIDATOR_HEADERS,
          },
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          412: preconditionFailed,
          422: errorResponse('Unknown coupon.'),
        },
      },
    },
    async (request, reply) => {
      const order = await services.core.orders.update(
        actorOf(request),
        request.params.order_id,
        patchInput(request.body),
        conditionalWrite(request, version),
      );
      return withValidators(reply, version, order);
    },
  );

  app.put(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'replaceOrder',
          'Replace an order',
          'Replaces items, currency, shipping_address and coupon_code (omitted means none) of a PENDING ' +
            'order. Prices are taken from the catalogue again; items get new ids.' +
            CONDITIONS,
        ),
        params: OrderParams,
        headers: ConditionalWriteHeaders,
        body: CreateOrderRequestSchema,
        response: {
          200: {
            ...version.orderSchema,
            description: 'The replaced order.',
            headers: ORDER_VALIDATOR_HEADERS,
          },
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          412: preconditionFailed,
          422: errorResponse('Unknown product or coupon.'),
        },
      },
    },
    async (request, reply) => {
      const order = await services.core.orders.replace(
        actorOf(request),
        request.params.order_id,
        createInput(request.body),
        conditionalWrite(request, version),
      );
      return withValidators(reply, version, order);
    },
  );

  app.delete(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'deleteOrder',
          'Delete an order',
          'Removes a PENDING or CANCELLED order (a PENDING one is cancelled first, so subscribers receive ' +
            'order.cancelled). Orders in fulfilment cannot be deleted.' +
            CONDITIONS,
        ),
        params: OrderParams,
        headers: ConditionalWriteHeaders,
        response: {
          204: NoContent,
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          412: preconditionFailed,
        },
      },
    },
    async (request, reply) => {
      await services.core.orders.delete(
        actorOf(request),
        request.params.order_id,
        conditionalWrite(request, version),
      );
      return reply.code(204).send(null);
    },
  );
}
