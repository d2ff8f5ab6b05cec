import type { OrderWriteOptions } from '../../../domain/orders.js';
import { standardErrors } from '../common-schemas.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import {
  ConditionalWriteHeaders,
  errorResponse,
  NoContent,
  OrderParams,
  ORDER_CONDITIONS_NOTE,
  preconditionFailedResponse,
} from './schemas.js';
import { conditionalWrite } from './validators.js';

/** The cancel and refund actions: 204 with no body, 409 when the order's state forbids them. */
export function registerActions({ app, services, version }: RouteContext): void {
  const actions = [
    {
      name: 'cancel',
      summary: 'Cancel an order',
      description: 'Allowed from PENDING or PROCESSING; the order becomes CANCELLED.',
      run: (actor: ReturnType<typeof actorOf>, id: string, options: OrderWriteOptions) =>
        services.core.orders.cancel(actor, id, options),
    },
    {
      name: 'refund',
      summary: 'Refund an order',
      description:
        'Refunds the full amount once, from SHIPPED or DELIVERED; the status stays and the order shows ' +
        'refunded: true.',
      run: (actor: ReturnType<typeof actorOf>, id: string, options: OrderWriteOptions) =>
        services.core.orders.refund(actor, id, options),
    },
  ];
  for (const action of actions) {
    app.post(
      `${version.prefix}/orders/:order_id/${action.name}`,
      {
        onRequest: authOn(services, 'orders:write'),
        schema: idempotentSchema({
          ...docs(version, `${action.name}Order`, action.summary, action.description + ORDER_CONDITIONS_NOTE),
          params: OrderParams,
          headers: ConditionalWriteHeaders,
          response: {
            204: NoContent,
            ...standardErrors,
            404: errorResponse('No order with this id.'),
            409: errorResponse('The order is in a state that forbids this action (conflict).'),
            412: preconditionFailedResponse(),
          },
        }),
      },
      async (request, reply) => {
        const actor = actorOf(request);
        const conditions = conditionalWrite(request, version);
        return sendIdempotent(services, request, reply, async (tx) => {
          await action.run(actor, request.params.order_id, { ...conditions, tx });
          return { status: 204, body: null, headers: {} };
        });
      },
    );
  }
}
