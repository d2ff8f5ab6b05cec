import { Type } from '@sinclair/typebox';
import { EVENT_TYPES } from '../../../webhooks/event-types.js';
import { MAX_URL_LENGTH } from '../../../webhooks/target-url.js';
import { CursorQuery, ErrorBodySchema, LimitQuery } from '../common-schemas.js';

const id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });

const EventList = Type.Array(
  Type.Unsafe<string>({
    type: 'string',
    enum: ['*', ...EVENT_TYPES],
    description: 'An event type, or * for all.',
  }),
  {
    maxItems: EVENT_TYPES.length + 1,
    description: 'Event types to receive; omitted, empty or ["*"] means every type, including future ones.',
  },
);

export const EndpointSchema = Type.Object({
  id: Type.String({ examples: ['whe_01jd0000000000000000000000'] }),
  user_id: Type.String(),
  url: Type.String({ format: 'uri' }),
  events: Type.Array(Type.String(), { examples: [['order.created', 'order.cancelled']] }),
  status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
  disabled_reason: Type.Union([Type.String(), Type.Null()], {
    description: 'Why a disabled endpoint was disabled (a 410 answer, or by hand).',
  }),
  previous_secret_expires_at: Type.Union([Type.String(), Type.Null()], {
    description: 'Until then deliveries also carry a signature with the secret before the last rotation.',
  }),
  created_at: Type.String({ description: 'ISO 8601.' }),
  updated_at: Type.String({ description: 'ISO 8601.' }),
});

export const EndpointWithSecretSchema = Type.Composite([
  EndpointSchema,
  Type.Object({
    secret: Type.String({
      description: 'The signing secret, shown only in this response. The whole string is the HMAC key.',
      examples: ['whsec_3q2+7w...'],
    }),
  }),
]);

export const CreateEndpointBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH, description: 'An absolute http(s) URL.' }),
    events: Type.Optional(EventList),
    user_id: Type.Optional(id('Whose endpoint; only an admin may name another user. Default: the caller.')),
  },
  { additionalProperties: false },
);

export const UpdateEndpointBody = Type.Object(
  {
    url: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH })),
    events: Type.Optional(EventList),
    enabled: Type.Optional(
      Type.Boolean({
        description: 'true re-enables an endpoint disabled by a 410 or by hand; false disables it.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const TestEventBody = Type.Object(
  {
    type: Type.Unsafe<string>({
      type: 'string',
      enum: [...EVENT_TYPES],
      description: 'The type of the sample event.',
    }),
  },
  { additionalProperties: false },
);

export const EndpointParams = Type.Object({ endpoint_id: id('A webhook endpoint id (whe_...).') });
export const DeliveryParams = Type.Object({
  endpoint_id: id('A webhook endpoint id (whe_...).'),
  delivery_id: id('A delivery id (dlv_...).'),
});
export const EventParams = Type.Object({ event_id: id('An event id (evt_ followed by hex).') });

export const EndpointListQuery = Type.Object({
  limit: Type.Optional(LimitQuery),
  cursor: Type.Optional(CursorQuery),
  user_id: Type.Optional(id("An admin may list another user's endpoints.")),
});

export const DeliveryListQuery = Type.Object({
  limit: Type.Optional(LimitQuery),
  cursor: Type.Optional(CursorQuery),
  status: Type.Optional(
    Type.Unsafe<'pending' | 'delivered' | 'failed'>({
      type: 'string',
      enum: ['pending', 'delivered', 'failed'],
    }),
  ),
});

export const AttemptListQuery = Type.Object({
  limit: Type.Optional(LimitQuery),
  cursor: Type.Optional(CursorQuery),
});

export const EventEnvelopeSchema = Type.Object(
  {
    id: Type.String({
      pattern: '^evt_[0-9a-f]+$',
      description: 'evt_ followed by hex; stable across attempts.',
    }),
    type: Type.String({ examples: ['order.created'] }),
    created: Type.Integer({ description: 'Unix seconds.' }),
    data: Type.Object({}, { additionalProperties: true }),
    api_version: Type.String({ examples: ['2026-11-28'] }),
  },
  { description: 'The envelope exactly as it is delivered.' },
);

export const DeliverySchema = Type.Object({
  id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  endpoint_id: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  round: Type.Integer({ description: '1 for the automatic schedule; each manual re-send adds one.' }),
  attempt_count: Type.Integer({ description: 'Attempts made in this round (0 to 5).' }),
  next_attempt_at: Type.Union([Type.String(), Type.Null()]),
  last_status_code: Type.Union([Type.Integer(), Type.Null()]),
  last_error: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  updated_at: Type.String(),
});

export const AttemptSchema = Type.Object({
  id: Type.String(),
  delivery_id: Type.String(),
  event_id: Type.String(),
  endpoint_id: Type.String(),
  round: Type.Integer(),
  attempt: Type.Integer({ description: 'The X-Webhook-Attempt value sent (1 to 5).' }),
  status_code: Type.Union([Type.Integer(), Type.Null()], { description: 'Null when no response arrived.' }),
  duration_ms: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'Timeout, connection error, HTTP status, ...',
  }),
  response_excerpt: Type.Union([Type.String(), Type.Null()], { description: 'The first 1 KiB of the body.' }),
  created_at: Type.String({ description: 'When the attempt started.' }),
});

export const errorResponse = (description: string) => ({ ...ErrorBodySchema, description });
