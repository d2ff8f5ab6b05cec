import { standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { createInput, patchInput } from './input.js';
import {
  CreateOrderRequestSchema,
  errorResponse,
  NoContent,
  OrderParams,
  PatchOrderRequestSchema,
} from './schemas.js';

const notFound = errorResponse('No order with this id.');
const stateConflict = errorResponse('The order is in a state that forbids this change (conflict).');

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
          'Update an order',
          'currency, shipping_address and coupon_code change while the order is PENDING. status: an admin ' +
            'moves it forward one step (PENDING, PROCESSING, SHIPPED, DELIVERED); CANCELLED cancels it ' +
            'like POST .../cancel. Setting the current status again changes nothing.',
        ),
        params: OrderParams,
        body: PatchOrderRequestSchema,
        response: {
          200: { ...version.orderSchema, description: 'The updated order.' },
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          422: errorResponse('Unknown coupon.'),
        },
      },
    },
    async (request) => {
      const order = await services.core.orders.update(
        actorOf(request),
        request.params.order_id,
        patchInput(request.body),
      );
      return version.order(order);
    },
  );

  app.put(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'Replace an order',
          'Replaces items, currency, shipping_address and coupon_code (omitted means none) of a PENDING ' +
            'order. Prices are taken from the catalogue again; items get new ids.',
        ),
        params: OrderParams,
        body: CreateOrderRequestSchema,
        response: {
          200: { ...version.orderSchema, description: 'The replaced order.' },
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          422: errorResponse('Unknown product or coupon.'),
        },
      },
    },
    async (request) => {
      const order = await services.core.orders.replace(
        actorOf(request),
        request.params.order_id,
        createInput(request.body),
      );
      return version.order(order);
    },
  );

  app.delete(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'Delete an order',
          'Removes a PENDING or CANCELLED order (a PENDING one is cancelled first, so subscribers receive ' +
            'order.cancelled). Orders in fulfilment cannot be deleted.',
        ),
        params: OrderParams,
        response: { 204: NoContent, ...standardErrors, 404: notFound, 409: stateConflict },
      },
    },
    async (request, reply) => {
      await services.core.orders.delete(actorOf(request), request.params.order_id);
      return reply.code(204).send(null);
    },
  );
}
