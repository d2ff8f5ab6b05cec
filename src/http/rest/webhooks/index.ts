import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../../compose.js';
import { webhooksOf } from '../../../webhooks/index.js';
import { webhookMetricsFor } from '../../../webhooks/metrics.js';
import type { RouteModule } from '../../routes.js';
import { locationHeader, NO_STORE, NoStoreHeaders, Page, standardErrors } from '../common-schemas.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';
import { actorOf, authOn } from '../orders/common.js';
import {
  AttemptListQuery,
  AttemptSchema,
  CreateEndpointBody,
  DeliveryListQuery,
  DeliveryParams,
  DeliverySchema,
  EndpointListQuery,
  EndpointParams,
  EndpointSchema,
  EndpointWithSecretSchema,
  errorResponse,
  EventEnvelopeSchema,
  EventParams,
  TestEventBody,
  UpdateEndpointBody,
} from './schemas.js';

const BASE = '/api/v2/webhook_endpoints';
// No `security`: the document takes it, with its scope, from each route's caller step (authOn).
const docs = (operationId: string, summary: string, description: string) => ({
  tags: ['webhooks'],
  operationId,
  summary,
  description,
});
const notFound = { 404: errorResponse('No endpoint (or delivery, or event) with this id.') };

const page = <T>(p: { data: T[]; hasMore: boolean; nextCursor: string | null }, limit: number) => ({
  data: p.data,
  pagination: { has_more: p.hasMore, next_cursor: p.nextCursor, limit },
});

/**
 * Webhook endpoints and what happened to their deliveries. Reading needs `users:read`, changing
 * `users:write` (an endpoint is a setting of the user's account that receives the user's own
 * records); the owner and admins act on an endpoint, anyone else gets 403.
 */
async function registerWebhookApi(app: FastifyInstance, services: Services): Promise<void> {
  // Registered here too, so an api-only process shows the queue gauges of separate workers.
  webhookMetricsFor(services);
  const { endpoints, deliveries } = webhooksOf(services);
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const read = authOn(services, 'users:read');
  const write = authOn(services, 'users:write');

  api.post(
    BASE,
    {
      onRequest: write,
      schema: idempotentSchema({
        ...docs(
          'createWebhookEndpoint',
          'Register a webhook endpoint',
          'Returns the signing secret once. The URL must be http(s); in production a URL that resolves to a ' +
            'loopback, private or link-local address is refused (validation_error, code private_address).',
        ),
        body: CreateEndpointBody,
        response: {
          201: {
            ...EndpointWithSecretSchema,
            description: 'The endpoint and its secret (shown only here).',
            headers: locationHeader(`${BASE}/{endpoint_id}`),
          },
          ...standardErrors,
          422: errorResponse('Unknown user, or too many endpoints.'),
        },
      }),
    },
    async (request, reply) => {
      const { url, events, user_id } = request.body;
      // Checked (the URL resolved) outside any transaction, and only for a request that is processed:
      // a replay answers what the first request was answered, whatever the URL resolves to now.
      return sendIdempotent(
        services,
        request,
        reply,
        async (tx, checked) => {
          const created = await endpoints.register(checked, tx);
          return { status: 201, body: created, headers: { location: `${BASE}/${created.id}` } };
        },
        () => endpoints.checkNew(actorOf(request), { url, events, userId: user_id }),
      );
    },
  );

  api.get(
    BASE,
    {
      onRequest: read,
      schema: {
        ...docs('listWebhookEndpoints', 'List webhook endpoints', "The caller's endpoints, newest first."),
        querystring: EndpointListQuery,
        response: { 200: { ...Page(EndpointSchema), headers: NoStoreHeaders }, ...standardErrors },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const p = await endpoints.list(actorOf(request), {
        ...request.query,
        userId: request.query.user_id,
        limit,
      });
      reply.header('cache-control', NO_STORE);
      return page(p, limit);
    },
  );

  api.get(
    `${BASE}/:endpoint_id`,
    {
      onRequest: read,
      schema: {
        ...docs(
          'getWebhookEndpoint',
          'Retrieve a webhook endpoint',
          'The secret is never shown again after creation or rotation.',
        ),
        params: EndpointParams,
        response: { 200: EndpointSchema, ...standardErrors, ...notFound },
      },
    },
    async (request) => endpoints.get(actorOf(request), request.params.endpoint_id),
  );

  api.patch(
    `${BASE}/:endpoint_id`,
    {
      onRequest: write,
      schema: {
        ...docs(
          'updateWebhookEndpoint',
          'Update a webhook endpoint',
          'Change the URL or the event types, or enable or disable it.',
        ),
        params: EndpointParams,
        body: UpdateEndpointBody,
        response: { 200: EndpointSchema, ...standardErrors, ...notFound },
      },
    },
    async (request) => endpoints.update(actorOf(request), request.params.endpoint_id, request.body),
  );

  api.delete(
    `${BASE}/:endpoint_id`,
    {
      onRequest: write,
      schema: {
        ...docs(
          'deleteWebhookEndpoint',
          'Delete a webhook endpoint',
          'Its deliveries and attempt records go with it.',
        ),
        params: EndpointParams,
        response: { 204: Type.Null({ description: 'No body.' }), ...standardErrors, ...notFound },
      },
    },
    async (request, reply) => {
      await endpoints.delete(actorOf(request), request.params.endpoint_id);
      return reply.code(204).send(null);
    },
  );

  api.post(
    `${BASE}/:endpoint_id/rotate_secret`,
    {
      onRequest: write,
      schema: idempotentSchema({
        ...docs(
          'rotateWebhookEndpointSecret',
          'Rotate the signing secret',
          'Returns the new secret once. For 24 hours deliveries carry two v1= signatures, one with the new and ' +
            'one with the old secret, so receivers verify with either.',
        ),
        params: EndpointParams,
        response: { 200: EndpointWithSecretSchema, ...standardErrors, ...notFound },
      }),
    },
    async (request, reply) => {
      const actor = actorOf(request);
      return sendIdempotent(services, request, reply, async (tx) => ({
        status: 200,
        body: await endpoints.rotateSecret(actor, request.params.endpoint_id, tx),
        headers: {},
      }));
    },
  );

  api.post(
    `${BASE}/:endpoint_id/test`,
    {
      onRequest: write,
      schema: idempotentSchema({
        ...docs(
          'testWebhookEndpoint',
          'Send a test event',
          'Queues a sample event of the given type (payment.failed, for one) for this endpoint only, through ' +
            'the usual schedule. Answers with the envelope that will be delivered. 409 when the endpoint is ' +
            'disabled (enable it first).',
        ),
        params: EndpointParams,
        body: TestEventBody,
        response: {
          202: EventEnvelopeSchema,
          ...standardErrors,
          ...notFound,
          409: errorResponse('The endpoint is disabled (conflict).'),
        },
      }),
    },
    async (request, reply) => {
      const actor = actorOf(request);
      return sendIdempotent(services, request, reply, async (tx) => ({
        status: 202,
        body: await endpoints.sendTest(actor, request.params.endpoint_id, request.body.type, tx),
        headers: {},
      }));
    },
  );

  api.get(
    `${BASE}/:endpoint_id/deliveries`,
    {
      onRequest: read,
      schema: {
        ...docs(
          'listWebhookDeliveries',
          'List deliveries to an endpoint',
          'One delivery per event; newest first.',
        ),
        params: EndpointParams,
        querystring: DeliveryListQuery,
        response: {
          200: { ...Page(DeliverySchema), headers: NoStoreHeaders },
          ...standardErrors,
          ...notFound,
        },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const p = await deliveries.listForEndpoint(actorOf(request), request.params.endpoint_id, {
        ...request.query,
        limit,
      });
      reply.header('cache-control', NO_STORE);
      return page(p, limit);
    },
  );

  api.get(
    `${BASE}/:endpoint_id/attempts`,
    {
      onRequest: read,
      schema: {
        ...docs(
          'listWebhookEndpointAttempts',
          'List delivery attempts to an endpoint',
          'Every attempt with its status code, duration, error and response excerpt; newest first.',
        ),
        params: EndpointParams,
        querystring: AttemptListQuery,
        response: {
          200: { ...Page(AttemptSchema), headers: NoStoreHeaders },
          ...standardErrors,
          ...notFound,
        },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const p = await deliveries.attemptsForEndpoint(actorOf(request), request.params.endpoint_id, {
        ...request.query,
        limit,
      });
      reply.header('cache-control', NO_STORE);
      return page(p, limit);
    },
  );

  api.post(
    `${BASE}/:endpoint_id/deliveries/:delivery_id/resend`,
    {
      onRequest: write,
      schema: idempotentSchema({
        ...docs(
          'resendWebhookDelivery',
          'Re-send a delivery',
          'Schedules a delivered or failed delivery again: a new round of up to five attempts, numbered from 1, ' +
            'with the same event id. 409 when it is still pending or the endpoint is disabled.',
        ),
        params: DeliveryParams,
        response: {
          202: DeliverySchema,
          ...standardErrors,
          ...notFound,
          409: errorResponse('Still pending, or the endpoint is disabled (conflict).'),
        },
      }),
    },
    async (request, reply) => {
      const actor = actorOf(request);
      const { endpoint_id, delivery_id } = request.params;
      return sendIdempotent(services, request, reply, async (tx) => ({
        status: 202,
        body: await deliveries.resend(actor, endpoint_id, delivery_id, tx),
        headers: {},
      }));
    },
  );

  api.get(
    '/api/v2/events/:event_id',
    {
      onRequest: read,
      schema: {
        ...docs(
          'getEvent',
          'Retrieve an event',
          'The envelope exactly as it is delivered; the owner of the event or an admin.',
        ),
        params: EventParams,
        response: { 200: EventEnvelopeSchema, ...standardErrors, ...notFound },
      },
    },
    async (request) => deliveries.event(actorOf(request), request.params.event_id),
  );

  api.get(
    '/api/v2/events/:event_id/attempts',
    {
      onRequest: read,
      schema: {
        ...docs(
          'listEventAttempts',
          'List the delivery attempts of an event',
          'To every endpoint it went to, oldest first.',
        ),
        params: EventParams,
        querystring: AttemptListQuery,
        response: {
          200: { ...Page(AttemptSchema), headers: NoStoreHeaders },
          ...standardErrors,
          ...notFound,
        },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 20;
      const p = await deliveries.attemptsForEvent(actorOf(request), request.params.event_id, {
        ...request.query,
        limit,
      });
      reply.header('cache-control', NO_STORE);
      return page(p, limit);
    },
  );
}

export const webhooksRouteModule: RouteModule = {
  name: 'webhooks',
  roles: ['api'],
  register: registerWebhookApi,
};
