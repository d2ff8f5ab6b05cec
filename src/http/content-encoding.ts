import type { FastifyInstance } from 'fastify';
import { DomainError } from '../domain/errors.js';

/**
 * The codings of a request body (its Content-Encoding, in order), `identity` left out: none means
 * the body is as it reads.
 */
export function bodyCodings(header: string | string[] | undefined): string[] {
  const values = Array.isArray(header) ? header : header === undefined ? [] : [header];
  return values
    .flatMap((value) => value.split(','))
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
}

/** The error for a body in a coding no route decodes; `statusCode` for surfaces that map by status. */
export function unsupportedEncoding(codings: string[]): DomainError {
  return Object.assign(
    new DomainError(
      'unsupported_media_type',
      `Content-Encoding ${codings.join(', ')} is not supported; send the request body uncompressed (Content-Encoding: identity or none).`,
      [],
      { headers: { 'accept-encoding': 'identity' } },
    ),
    { statusCode: 415 },
  );
}

/**
 * No route decodes a compressed request body: one sent with a Content-Encoding other than
 * `identity` is 415 (RFC 9110 §8.4.1, §15.5.16) with `Accept-Encoding: identity`, before the body is
 * read, on every surface (REST, token server, GraphQL, each in its own error shape). Until then the
 * header was ignored: gzip was called malformed JSON, and a plain body labelled `br` was used as if
 * it had been decoded. A request without a body is not concerned. preParsing: after the caller step
 * (onRequest), as every body rule.
 */
export function refuseEncodedBodies(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const headers = request.headers;
    if (headers['content-encoding'] === undefined) return done(null, payload);
    const hasBody =
      headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? '0') > 0;
    const codings = bodyCodings(headers['content-encoding']);
    if (hasBody && codings.length > 0) return done(unsupportedEncoding(codings));
    done(null, payload);
  });
}
