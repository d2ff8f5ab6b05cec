import { Type } from '@sinclair/typebox';
import { CALLER_VARY, CallerVaryHeaders, standardErrors } from '../common-schemas.js';
import { notModified } from '../../../domain/order-conditions.js';
import { actorOf, addVary, authOn, docs, headerText, type RouteContext } from './common.js';
import { errorResponse, OrderParams } from './schemas.js';
import { orderValidators } from './validators.js';

const CACHE_CONTROL = 'private, max-age=60';
const VALIDATOR_HEADERS = {
  ETag: { type: 'string', description: 'Quoted hash of this representation.' },
  'Last-Modified': { type: 'string', description: 'HTTP date of the last change.' },
  'Cache-Control': { type: 'string', description: CACHE_CONTROL },
  ...CallerVaryHeaders,
};

/** GET one order, with validators for conditional requests. */
export function registerRead({ app, services, version }: RouteContext): void {
  app.get(
    `${version.prefix}/orders/:order_id`,
    {
      onRequest: authOn(services, 'orders:read'),
      config: { readOnly: true },
      schema: {
        ...docs(
          version,
          'getOrder',
          'Retrieve an order',
          'Answers 304 when If-None-Match matches the ETag (weak comparison, `*` and lists accepted) or, ' +
            'without If-None-Match, when the order was not modified after If-Modified-Since (whole seconds; ' +
            'never when it changed twice in the second named, a weak date).',
        ),
        params: OrderParams,
        headers: Type.Object({
          'if-none-match': Type.Optional(Type.String({ description: 'One or more entity tags, or *.' })),
          'if-modified-since': Type.Optional(Type.String({ description: 'An HTTP date.' })),
        }),
        response: {
          200: {
            ...version.orderSchema,
            description: 'The order.',
            headers: VALIDATOR_HEADERS,
          },
          304: Type.Null({ description: 'Not modified: no body.', headers: VALIDATOR_HEADERS }),
          ...standardErrors,
          404: errorResponse('No order with this id.'),
        },
      },
    },
    async (request, reply) => {
      const order = await services.core.orders.get(actorOf(request), request.params.order_id);
      const { body, ...validators } = orderValidators(version, order);
      const { etag, lastModified } = validators;
      reply.header('etag', etag);
      reply.header('last-modified', lastModified.toUTCString());
      reply.header('cache-control', CACHE_CONTROL);
      addVary(reply, ...CALLER_VARY);
      const conditions = {
        ifNoneMatch: headerText(request, 'if-none-match'),
        ifModifiedSince: headerText(request, 'if-modified-since'),
      };
      if (notModified(conditions, validators)) return reply.code(304).send(null);
      return body;
    },
  );
}
