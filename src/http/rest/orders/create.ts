import { checkIdempotencyKey, fingerprint, type StoredResponse } from '../../../domain/idempotency.js';
import type { Order } from '../../../domain/order-model.js';
import { standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { createInput } from './input.js';
import { CreateOrderRequestSchema, errorResponse, IdempotencyHeaders } from './schemas.js';

/** POST an order; with an Idempotency-Key, repeats within 24 hours replay the first response. */
export function registerCreate({ app, services, version }: RouteContext): void {
  const path = `${version.prefix}/orders`;
  app.post(
    path,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'Create an order',
          'Prices come from the product catalogue. Send an Idempotency-Key to make retries safe.',
        ),
        headers: IdempotencyHeaders,
        body: CreateOrderRequestSchema,
        response: {
          201: {
            ...version.orderSchema,
            description: 'Created (or replayed, with Idempotent-Replayed: true).',
            headers: {
              Location: { type: 'string', description: `${path}/{order_id}` },
              'Idempotent-Replayed': { type: 'string', description: 'true when this is a stored response.' },
            },
          },
          ...standardErrors,
          409: errorResponse('idempotency_in_progress: the first request with this key is still running.'),
          422: errorResponse(
            'Unknown product or coupon (validation_error with details), or idempotency_key_reused.',
          ),
        },
      },
    },
    async (request, reply) => {
      const actor = actorOf(request);
      const key = checkIdempotencyKey(request.headers['idempotency-key']);
      const input = createInput(request.body);
      const respond = (order: Order): StoredResponse => ({
        status: 201,
        body: version.order(order),
        headers: { location: `${path}/${order.id}` },
      });
      let outcome: StoredResponse & { replayed?: boolean };
      if (key === undefined) {
        outcome = respond(await services.core.orders.create(actor, input));
      } else {
        // The route is part of what makes two requests "the same", so a v1 key cannot replay a v2 body.
        const claim = {
          ownerId: actor.id,
          key,
          fingerprint: fingerprint({ route: `POST ${path}`, body: request.body }),
        };
        outcome = await services.core.idempotency.execute(claim, async (tx) =>
          respond(await services.core.orders.createIn(tx, actor, input)),
        );
        if (outcome.replayed) reply.header('idempotent-replayed', 'true');
      }
      return reply.code(outcome.status).headers(outcome.headers).send(outcome.body);
    },
  );
}
