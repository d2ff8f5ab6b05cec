import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * How far past BODY_LIMIT_BYTES a declared body may go and still be read to its end (and thrown
 * away) after the 413, rather than the connection closed under it. nginx lets through bodies up to
 * BODY_LIMIT_BYTES plus this much (src/cluster/nginx-config.ts renders its limit from it), so every
 * body nginx forwards is one an instance reads to the end.
 */
export const REFUSED_BODY_DRAIN_BYTES = 1024 * 1024;

/**
 * Fastify answers a body over the limit (413) with `Connection: close`, and Node then closes the
 * socket at once, with the body still arriving. A proxy still writing that body (nginx buffers a
 * request whole, then sends it) meets a reset and answers its client 502, never retried for a POST,
 * instead of the instance's 413: seen through nginx with a body of BODY_LIMIT_BYTES + 1.
 *
 * When the body's length is declared and at most REFUSED_BODY_DRAIN_BYTES over the limit, the
 * connection stays open: Node reads the unread body to its declared end and discards it (it does so
 * for any request whose body nobody read), and the connection serves the next request. A body
 * sent chunked, or declared larger, still closes the connection: reading it could take as long as
 * the client likes.
 */
export function keepAliveAfterRefusedBody(
  request: FastifyRequest,
  reply: FastifyReply,
  bodyLimit: number,
): void {
  if (reply.statusCode !== 413 || reply.getHeader('connection') !== 'close') return;
  const { headers } = request.raw;
  if (headers['transfer-encoding'] !== undefined) return;
  const declared = Number(headers['content-length']);
  if (!Number.isSafeInteger(declared) || declared > bodyLimit + REFUSED_BODY_DRAIN_BYTES) return;
  reply.removeHeader('connection');
}
