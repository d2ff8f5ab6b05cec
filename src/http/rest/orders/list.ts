import type { OrderPage } from '../../../domain/order-model.js';
import { NO_STORE, NoStoreHeaders, Page, standardErrors } from '../common-schemas.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { ListQuery } from './schemas.js';
import type { ApiVersion } from './versions.js';

export function pageBody(version: ApiVersion, page: OrderPage, limit: number) {
  return {
    data: page.orders.map(version.order),
    pagination: { has_more: page.hasMore, next_cursor: page.nextCursor, limit },
  };
}

/** GET the caller's orders, newest first by default, keyset-paged. */
export function registerList({ app, services, version }: RouteContext): void {
  app.get(
    `${version.prefix}/orders`,
    {
      onRequest: authOn(services, 'orders:read'),
      config: { readOnly: true },
      schema: {
        ...docs(
          version,
          'listOrders',
          "List the caller's orders",
          'Ordered by created_at then id (descending by default). The cursor is bound to the list it came ' +
            'from (caller, sort and status filter); using it elsewhere is 400.',
        ),
        querystring: ListQuery,
        response: { 200: { ...Page(version.orderSchema), headers: NoStoreHeaders }, ...standardErrors },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const page = await services.core.orders.list(actorOf(request), { ...request.query, limit });
      reply.header('cache-control', NO_STORE);
      return pageBody(version, page, limit);
    },
  );
}
