import { ErrorBodySchema, NO_STORE, NoStoreHeaders, Page, standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type OrdersApp } from './common.js';
import type { Services } from '../../../compose.js';
import { pageBody } from './list.js';
import { ListQuery, UserParams } from './schemas.js';
import { V2 } from './versions.js';
import { userApiErrorHandler } from '../users/errors.js';

/**
 * GET /v1/users/{user_id}/orders: a user's orders for the user themself or an admin. It belongs to
 * the user API, so it shares that API's error handler (upper-case resource errors, credential
 * errors as everywhere); orders appear in the current (v2) representation because `/v1` here is the
 * user API's version, not the deprecated order API's.
 */
export async function registerUserOrders(app: OrdersApp, services: Services): Promise<void> {
  await app.register(async (scope) => {
    scope.setErrorHandler(userApiErrorHandler);
    registerRoute(scope as OrdersApp, services);
  });
}

function registerRoute(app: OrdersApp, services: Services): void {
  app.get(
    '/v1/users/:user_id/orders',
    {
      onRequest: authOn(services, 'orders:read'),
      config: { readOnly: true },
      schema: {
        ...docs(
          V2,
          'listUserOrders',
          "List a user's orders",
          'The user themself or an admin; anyone else gets 403. Same envelope, ordering and cursors as ' +
            'GET /api/v2/orders.',
        ),
        tags: ['users'],
        params: UserParams,
        querystring: ListQuery,
        response: {
          200: { ...Page(V2.orderSchema), headers: NoStoreHeaders },
          ...standardErrors,
          404: { ...ErrorBodySchema, description: 'No such user (error NOT_FOUND).' },
        },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const page = await services.core.orders.listForUser(actorOf(request), request.params.user_id, {
        ...request.query,
        limit,
      });
      reply.header('cache-control', NO_STORE);
      return pageBody(V2, page, limit);
    },
  );
}
