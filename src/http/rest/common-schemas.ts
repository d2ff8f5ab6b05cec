import { Type, type TSchema } from '@sinclair/typebox';
import { COUPON_CODE_PATTERN, COUPON_CODE_RULE } from '../../domain/coupons.js';

/**
 * The format characters (Unicode's Cf) of the Basic Multilingual Plane, as `\u` escapes: what a
 * pattern that every regex dialect reads can name. `\p{Cf}` needs ECMAScript's `u` flag, which
 * clients generated from the document do not set (Python's `re` refuses it outright); the 127
 * format characters above U+FFFF (tag characters and the like) are left to the core's isBlank.
 */
export const BMP_FORMAT_CHARACTERS =
  '\\u00AD\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u0890-\\u0891\\u08E2\\u180E\\u200B-\\u200F' +
  '\\u202A-\\u202E\\u2060-\\u2064\\u2066-\\u206F\\uFEFF\\uFFF9-\\uFFFB';

/**
 * "Not blank" as a request schema says it: a character other than white space and invisible format
 * characters (the core's isBlank, which also decides the rare ones above U+FFFF). A refusal by it
 * reads "must not be blank", as the core's does, not as the pattern (src/http/errors.ts).
 */
export const NOT_BLANK = `[^\\s${BMP_FORMAT_CHARACTERS}]`;
/** Empty or not blank: the empty string is left to `minLength`, so it reports one problem, not two. */
export const EMPTY_OR_NOT_BLANK = `^$|${NOT_BLANK}`;

const BLANK_REFUSAL = { message: 'must not be blank', code: 'range_error' };
/**
 * A refusal by each pattern the REST schemas publish, in the core's words and detail code for the
 * same rule (checkText, checkName, normaliseCouponCode) rather than ajv's "must match pattern ...":
 * one answer on every surface. A pattern not listed keeps ajv's words (src/http/errors.ts).
 */
export const PATTERN_REFUSALS: ReadonlyMap<string, { message: string; code: string }> = new Map([
  [NOT_BLANK, BLANK_REFUSAL],
  [EMPTY_OR_NOT_BLANK, BLANK_REFUSAL],
  [COUPON_CODE_PATTERN, { message: COUPON_CODE_RULE, code: 'invalid_format' }],
]);

/** The spec's REST error body; every error response of every route is described with it. */
export const ErrorDetailSchema = Type.Object(
  {
    field: Type.Union([Type.String(), Type.Null()]),
    message: Type.String(),
    code: Type.String({ examples: ['range_error', 'invalid_enum', 'required'] }),
  },
  { $id: 'ErrorDetail' },
);

export const ErrorBodySchema = Type.Object(
  {
    error: Type.String({ examples: ['validation_error', 'not_found', 'forbidden', 'invalid_api_key'] }),
    message: Type.String(),
    request_id: Type.String(),
    details: Type.Array(ErrorDetailSchema),
  },
  { $id: 'ErrorBody', additionalProperties: true },
);

export const RateLimitedBodySchema = Type.Composite([
  ErrorBodySchema,
  Type.Object({ limit: Type.Integer(), window_seconds: Type.Integer(), retry_after: Type.Integer() }),
]);

/** The list envelope: `{ data, pagination: { has_more, next_cursor, limit } }`. */
export function Page<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    pagination: Type.Object({
      has_more: Type.Boolean(),
      next_cursor: Type.Union([Type.String(), Type.Null()]),
      limit: Type.Integer({ minimum: 1, maximum: 100 }),
    }),
  });
}

export const LimitQuery = Type.Integer({
  minimum: 1,
  maximum: 100,
  default: 20,
  description: 'Page size, 1 to 100.',
});
export const CursorQuery = Type.String({
  minLength: 1,
  maxLength: 1024,
  description: 'Opaque cursor from pagination.next_cursor.',
});

/**
 * Response headers that routes set themselves, declared (in the response schema's `headers`, which
 * the OpenAPI generator reads) from the same constants the routes send.
 */
export const NO_STORE = 'no-store';
export const NoStoreHeaders = {
  'Cache-Control': {
    type: 'string',
    const: NO_STORE,
    description: '`no-store`: a page is a snapshot that no cache should keep.',
  },
};

/** The names a representation that depends on the caller's credentials varies on. */
export const CALLER_VARY = ['Authorization', 'X-API-Key'] as const;
export const CallerVaryHeaders = {
  Vary: {
    type: 'string',
    description: `Includes \`${CALLER_VARY.join(', ')}\`: the answer depends on the caller's credentials.`,
  },
};

/** A 201's Location header, naming the created resource by its path template. */
export const locationHeader = (template: string) => ({
  Location: { type: 'string', description: `The created resource: \`${template}\`.` },
});

/** Error responses shared by every authenticated route, for the OpenAPI document. */
export const standardErrors = {
  400: { ...ErrorBodySchema, description: 'Invalid request fields (validation_error with details).' },
  401: { ...ErrorBodySchema, description: 'Missing, invalid or revoked credentials.' },
  403: {
    ...ErrorBodySchema,
    description:
      "`insufficient_scope`: the credentials lack the route's scope; or `forbidden`: the resource belongs to someone else.",
  },
  429: { ...RateLimitedBodySchema, description: 'Rate limit exceeded; see Retry-After.' },
  500: { ...ErrorBodySchema, description: 'Unexpected error; the body never carries internals.' },
};

/** The Idempotency-Key request header of every REST POST that changes something (src/http/rest/idempotent.ts). */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        'Optional. 1 to 255 printable characters, kept 24 hours per caller. A repeat of the same request ' +
        '(method, path and body) returns the first response with Idempotent-Replayed: true and does ' +
        'nothing again; the same key with another path or body is 422 idempotency_key_reused; a repeat ' +
        'while the first is unfinished is 409 idempotency_in_progress.',
    }),
  ),
});
