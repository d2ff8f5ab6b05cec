import { MAX_ITEMS } from '../../../domain/order-model.js';
import { locationHeader, Page, standardErrors } from '../common-schemas.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';
import { actorOf, authOn, docs, type RouteContext } from './common.js';
import { itemInput } from './input.js';
import {
  ConditionalWriteHeaders,
  errorResponse,
  ItemParams,
  ItemsListQuery,
  NoContent,
  OrderItemInputSchema,
  OrderParams,
  ORDER_CONDITIONS_NOTE,
  preconditionFailedResponse,
} from './schemas.js';
import { conditionalWrite } from './validators.js';

const notFound = errorResponse('No order, or no item with this id in the order.');
const stateConflict = errorResponse('The order is no longer PENDING, or the item is its last one.');
const preconditionFailed = preconditionFailedResponse();

/** The line items of an order: list, read one, add, remove. */
export function registerItems({ app, services, version }: RouteContext): void {
  const base = `${version.prefix}/orders/:order_id/items`;

  app.get(
    base,
    {
      onRequest: authOn(services, 'orders:read'),
      config: { readOnly: true },
      schema: {
        ...docs(
          version,
          'listOrderItems',
          'List the items of an order',
          `Oldest first, paged like every list (limit 1 to 100, default 20; an order holds at most ${MAX_ITEMS}). ` +
            'The cursor is bound to the order it came from; using it elsewhere is 400.',
        ),
        params: OrderParams,
        querystring: ItemsListQuery,
        response: { 200: Page(version.itemSchema), ...standardErrors, 404: notFound },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 20;
      const page = await services.core.orders.listItems(actorOf(request), request.params.order_id, {
        limit,
        cursor: request.query.cursor,
      });
      return {
        data: page.items.map(version.item),
        pagination: { has_more: page.hasMore, next_cursor: page.nextCursor, limit },
      };
    },
  );

  app.get(
    `${base}/:item_id`,
    {
      onRequest: authOn(services, 'orders:read'),
      config: { readOnly: true },
      schema: {
        ...docs(version, 'getOrderItem', 'Retrieve one item of an order'),
        params: ItemParams,
        response: { 200: version.itemSchema, ...standardErrors, 404: notFound },
      },
    },
    async (request) => {
      const { order_id, item_id } = request.params;
      return version.item(await services.core.orders.getItem(actorOf(request), order_id, item_id));
    },
  );

  app.post(
    base,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: idempotentSchema({
        ...docs(
          version,
          'addOrderItem',
          'Add an item to an order',
          'Body: { product_id, quantity }. Allowed while the order is PENDING and has fewer than 50 items; ' +
            'the unit price comes from the catalogue and the totals are recomputed.' +
            ORDER_CONDITIONS_NOTE,
        ),
        params: OrderParams,
        headers: ConditionalWriteHeaders,
        body: OrderItemInputSchema,
        response: {
          201: {
            ...version.itemSchema,
            description: 'The new item.',
            headers: locationHeader(`${base}/{item_id}`),
          },
          ...standardErrors,
          404: notFound,
          409: stateConflict,
          412: preconditionFailed,
          422: errorResponse('Unknown product, or the order already has 50 items.'),
        },
      }),
    },
    async (request, reply) => {
      const actor = actorOf(request);
      const input = itemInput(request.body);
      const conditions = conditionalWrite(request, version);
      return sendIdempotent(services, request, reply, async (tx) => {
        const { order, item } = await services.core.orders.addItem(actor, request.params.order_id, input, {
          ...conditions,
          tx,
        });
        return {
          status: 201,
          body: version.item(item),
          headers: { location: `${version.prefix}/orders/${order.id}/items/${item.id}` },
        };
      });
    },
  );

  app.delete(
    `${base}/:item_id`,
    {
      onRequest: authOn(services, 'orders:write'),
      schema: {
        ...docs(
          version,
          'removeOrderItem',
          'Remove an item from an order',
          'Allowed while PENDING; the last item cannot be removed.' + ORDER_CONDITIONS_NOTE,
        ),
        params: ItemParams,
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
      const { order_id, item_id } = request.params;
      await services.core.orders.removeItem(
        actorOf(request),
        order_id,
        item_id,
        conditionalWrite(request, version),
      );
      return reply.code(204).send(null);
    },
  );
}
