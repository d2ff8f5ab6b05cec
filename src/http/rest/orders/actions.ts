import { standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { errorResponse, NoContent, OrderParams } from './schemas.js';

/** The cancel and refund actions: 204 with no body, 409 when the order's state forbids them. */
export function registerActions({ app, services, version }: RouteContext): void {
  const actions = [
    {
      name: 'cancel',
      summary: 'Cancel an order',
      description: 'Allowed from PENDING or PROCESSING; the order becomes CANCELLED.',
      run: (actor: ReturnType<typeof actorOf>, id: string) => services.core.orders.cancel(actor, id),
    },
    {
      name: 'refund',
      summary: 'Refund an order',
      description:
        'Refunds the full amount once, from SHIPPED or DELIVERED; the status stays and the order shows ' +
        'refunded: true.',
      run: (actor: ReturnType<typeof actorOf>, id: string) => services.core.orders.refund(actor, id),
    },
  ];
  for (const action of actions) {
    app.post(
      `${version.prefix}/orders/:order_id/${action.name}`,
      {
        onRequest: authOn(services, 'orders:write'),
        schema: {
          ...docs(version, action.summary, action.description),
          params: OrderParams,
          response: {
            204: NoContent,
            ...standardErrors,
            404: errorResponse('No order with this id.'),
            409: errorResponse('The order is in a state that forbids this action (conflict).'),
          },
        },
      },
      async (request, reply) => {
        await action.run(actorOf(request), request.params.order_id);
        return reply.code(204).send(null);
      },
    );
  }
}
