import { type TObject, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../compose.js';
import type { Tx } from '../../domain/context.js';
import { checkIdempotencyKey, fingerprint, type StoredResponse } from '../../domain/idempotency.js';
import { ErrorBodySchema, IdempotencyHeaders } from './common-schemas.js';
import { actorOf } from './orders/common.js';

/**
 * Idempotency-Key on every REST POST that changes something, as Stripe honours it (docs/rest.md):
 * the HTTP side of the idempotency core (src/domain/idempotency.ts), shared by every such route.
 *
 * `work` is the route's call into its core. Without a key it runs as it always did (tx undefined:
 * the core opens its own transaction). With a key the core claims (caller, key) and runs `work` in
 * the transaction that also stores the answer, so the change and the stored answer commit together;
 * a repeat gets the stored answer with `Idempotent-Replayed: true`, another path or body with the
 * same key 422 `idempotency_key_reused`, a repeat of an unfinished one 409 `idempotency_in_progress`.
 * Only successes are stored: a thrown error releases the key.
 *
 * `check` is for a route's checks that must not run inside a transaction (a URL resolved): it runs
 * only for a request that is processed, its result handed to `work`; a replay answers without it.
 */
export async function sendIdempotent<C = undefined>(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  work: (tx: Tx | undefined, checked: C) => Promise<StoredResponse>,
  check?: () => Promise<C>,
): Promise<FastifyReply> {
  const key = checkIdempotencyKey(request.headers['idempotency-key']);
  let outcome: StoredResponse & { replayed?: boolean };
  if (key === undefined) {
    outcome = await work(undefined, check ? await check() : (undefined as C));
  } else {
    const claim = { ownerId: actorOf(request).id, key, fingerprint: requestFingerprint(request) };
    outcome = await services.core.idempotency.execute(claim, (tx, checked: C) => work(tx, checked), check);
    if (outcome.replayed) reply.header('idempotent-replayed', 'true');
  }
  return reply.code(outcome.status).headers(outcome.headers).send(outcome.body);
}

/**
 * What makes two requests "the same": the method, the path (without the query; it names the
 * resource, so a key used on one order's cancel is refused on another's) and the body, compared as
 * canonical JSON. `{ route: 'POST /api/v2/orders', body }` is the shape order creation used before
 * every POST honoured a key, so keys stored before the change still replay.
 */
export function requestFingerprint(request: FastifyRequest): string {
  const path = request.url.split('?', 1)[0];
  return fingerprint({ route: `${request.method} ${path}`, body: request.body });
}

const IN_PROGRESS = 'idempotency_in_progress: the first request with this Idempotency-Key is still running.';
const REUSED = 'idempotency_key_reused: this Idempotency-Key was used for another path or body.';
const REPLAYED = {
  type: 'string',
  description: 'true when this is the stored answer to an earlier request.',
};

/** A response schema: TypeBox's, or a plain JSON Schema object. */
type Answer = { description?: unknown; headers?: Record<string, unknown> };
type Responses = Record<number, object>;

/**
 * A POST route's schema with what `sendIdempotent` adds, for validation and the OpenAPI document
 * alike: the Idempotency-Key header, `Idempotent-Replayed` on its successes, and the 409 and 422 it
 * may answer (joined to the route's own 409 or 422 when it has one).
 */
export function idempotentSchema<S extends { response: Responses; headers?: TObject }>(
  schema: S,
): S & { headers: TObject } {
  const response: Record<number, Answer> = {};
  for (const [code, answer] of Object.entries(schema.response)) {
    const status = Number(code);
    const a = answer as Answer;
    response[status] =
      status >= 200 && status < 300
        ? { ...a, headers: { ...a.headers, 'Idempotent-Replayed': REPLAYED } }
        : a;
  }
  for (const [status, text] of [
    [409, IN_PROGRESS],
    [422, REUSED],
  ] as const) {
    const own = response[status];
    response[status] = own
      ? { ...own, description: `${String(own.description ?? '').replace(/\.?$/, '.')} Or ${text}` }
      : { ...ErrorBodySchema, description: text };
  }
  // A route's own headers (the order writes' If-Match) stay beside the key.
  const headers = schema.headers ? Type.Composite([schema.headers, IdempotencyHeaders]) : IdempotencyHeaders;
  return { ...schema, headers, response };
}
