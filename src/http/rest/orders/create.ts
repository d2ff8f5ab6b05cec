import { locationHeader, standardErrors } from '../common-schemas.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { createInput } from './input.js';
import { CreateOrderRequestSchema, errorResponse } from './schemas.js';

/** POST an order; with an Idempotency-Key, repeats within 24 hours replay the first response. */
export function registerCreate({ app, services, version }: RouteContext): void {
  const path = `${version.prefix}/orders`;
  app.post(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: idempotentSchema({
        ...docs(
          version,
          'createOrder',
          'Create an order',
          'Prices come from the product catalogue. Send an Idempotency-Key to make retries safe.',
        ),
        body: CreateOrderRequestSchema,
        response: {
          201: {
            ...version.orderSchema,
            description: 'Created (or replayed, with Idempotent-Replayed: true).',
            headers: locationHeader(`${path}/{order_id}`),
          },
          ...standardErrors,
          422: errorResponse('Unknown product or coupon (validation_error with details).'),
        },
      }),
    },
    async (request, reply) => {
      const actor = actorOf(request);
      const input = createInput(request.body);
      return sendIdempotent(services, request, reply, async (tx) => {
        const order = await services.core.orders.create(actor, input, tx);
        return { status: 201, body: version.order(order), headers: { location: `${path}/${order.id}` } };
      });
    },
  );
}
