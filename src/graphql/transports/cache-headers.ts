import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Cache-Control and Vary for /graphql's answers over plain HTTP (GET and POST; event streams keep
 * Yoga's own `no-cache`, GraphiQL's page is left alone).
 *
 * - Every answer varies on `Authorization`, `X-API-Key` and `Accept` (beside CORS's `Origin`): the
 *   caller decides what the data may show, and Accept the media type and status.
 * - `private, no-store` for anything a cache must not keep: an answer to a request with credentials
 *   (per-user data: drafts, emails, orders), any error (a status other than 200, or `errors` in the
 *   body: a refused credential, an unknown hash, a field error, a budget refusal), and every POST.
 * - `no-cache` for an anonymous GET answered 200 without errors: the data is what the core shows
 *   everyone, so it may be stored, but it is revalidated before each use (Atrium sends no validator,
 *   so in effect it is asked for again), and a post unpublished or deleted disappears at once.
 *
 * Until 2026-11-28 these answers carried only `Vary: Origin`, a persisted-hash GET of one caller's
 * data included.
 */
export function graphqlCacheHeaders(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (err: null, payload: unknown) => void,
): void {
  const type = String(reply.getHeader('content-type') ?? '');
  if (type.includes('json')) {
    addVary(reply, 'Authorization', 'X-API-Key', 'Accept');
    const anonymous =
      request.headers.authorization === undefined && request.headers['x-api-key'] === undefined;
    const clean =
      request.method === 'GET' &&
      anonymous &&
      reply.statusCode === 200 &&
      typeof payload === 'string' &&
      // A top-level `errors` member, or a field of that name in the data: either way, not stored.
      !payload.includes('"errors":');
    reply.header('cache-control', clean ? 'no-cache' : 'private, no-store');
  }
  done(null, payload);
}

/** Adds names to Vary without dropping what other steps (CORS) put there. */
function addVary(reply: FastifyReply, ...names: string[]): void {
  const current = reply.getHeader('vary');
  const have = (Array.isArray(current) ? current.join(',') : String(current ?? ''))
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  const lower = new Set(have.map((v) => v.toLowerCase()));
  for (const name of names) if (!lower.has(name.toLowerCase())) have.push(name);
  reply.header('vary', have.join(', '));
}
