import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../domain/errors.js';
import { decodeUtf8 } from '../http/body-text.js';
import { InvalidRequest, OAuthError, ServerError } from './errors.js';
import { isStoreUnavailable } from '../store/errors.js';
import { loggedAsOutage } from '../http/errors.js';

/** Form bodies of the token server are small; a larger one is an attack or a mistake. */
export const FORM_BODY_LIMIT = 16 * 1024;

/**
 * Request parameters as RFC 6749 §3.1 reads them: an empty value is as if the parameter were
 * absent, and a repeated parameter is an error the caller must see, not a value to guess from.
 */
export class Params {
  private constructor(
    private readonly values: Map<string, string>,
    readonly repeated: ReadonlySet<string>,
  ) {}

  static fromSearch(search: URLSearchParams): Params {
    const values = new Map<string, string>();
    const repeated = new Set<string>();
    for (const [name, value] of search) {
      if (value === '') continue;
      if (values.has(name)) repeated.add(name);
      values.set(name, value);
    }
    return new Params(values, repeated);
  }

  static fromRecord(record: Record<string, unknown>): Params {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(record)) {
      for (const v of Array.isArray(value) ? value : [value])
        if (typeof v === 'string') search.append(name, v);
    }
    return Params.fromSearch(search);
  }

  get(name: string): string | undefined {
    return this.values.get(name);
  }

  /** A parameter that must be present once; `what` names it in the error. */
  require(name: string): string {
    this.single(name);
    const v = this.values.get(name);
    if (v === undefined) throw new InvalidRequest(`The ${name} parameter is required.`);
    return v;
  }

  /** The value, or undefined; a repeated parameter is refused. */
  single(name: string): string | undefined {
    if (this.repeated.has(name)) throw new InvalidRequest(`The ${name} parameter must not be repeated.`);
    return this.values.get(name);
  }

  entries(): IterableIterator<[string, string]> {
    return this.values.entries();
  }
}

/** The form body of a token-server POST, or invalid_request when it is not a form. */
export function formParams(request: FastifyRequest): Params {
  if (typeof request.body !== 'string') {
    throw new InvalidRequest('The request body must be application/x-www-form-urlencoded.');
  }
  return Params.fromSearch(new URLSearchParams(request.body));
}

/**
 * Token-server routes live in their own Fastify scope: forms are read as raw strings (so repeated
 * parameters can be detected) and every failure is an RFC 6749 error body instead of the REST one.
 */
export function oauthScope(scope: FastifyInstance): void {
  scope.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer', bodyLimit: FORM_BODY_LIMIT },
    (_request, body, done) => {
      const text = formText(body as Buffer);
      if (text === undefined) return done(notUtf8(), undefined);
      done(null, text);
    },
  );
  scope.setErrorHandler((err, request, reply) => sendOAuthError(request, reply, err));
}

const notUtf8 = () =>
  new InvalidRequest(
    'The request body is not UTF-8: send parameters as UTF-8, percent-encoded (application/x-www-form-urlencoded).',
  );

/**
 * A form's text, or undefined when its bytes, or the bytes its percent escapes spell, are not UTF-8.
 * URLSearchParams (like Fastify's 'string' body) puts U+FFFD in place of such bytes, so
 * `client_id=%E9` was read as the client id "\ufffd" instead of being refused as malformed.
 */
function formText(body: Buffer): string | undefined {
  let text: string;
  try {
    text = decodeUtf8(body);
  } catch {
    return undefined;
  }
  for (const part of text.split('&')) {
    // decodeURIComponent throws on escapes that spell no UTF-8; a '%' that starts no escape is
    // left as text by URLSearchParams, so it is escaped here rather than refused.
    try {
      decodeURIComponent(part.replace(/%(?![0-9a-fA-F]{2})/g, '%25'));
    } catch {
      return undefined;
    }
  }
  return text;
}

export function sendOAuthError(request: FastifyRequest, reply: FastifyReply, thrown: unknown): FastifyReply {
  const err = toOAuthError(thrown);
  // A database outage is logged once for every surface (loggedAsOutage); anything else in full.
  if (err.status >= 500 && !(err.status === 503 && loggedAsOutage(request, thrown)))
    request.log.error({ err: thrown }, 'token server error');
  noStore(reply);
  return reply.code(err.status).headers(err.headers).type('application/json; charset=utf-8').send(err.body());
}

function toOAuthError(thrown: unknown): OAuthError {
  if (thrown instanceof OAuthError) return thrown;
  // The store refuses values it cannot hold (a NUL for PostgreSQL) as invalid input.
  if (
    thrown instanceof DomainError &&
    (thrown.code === 'validation_error' || thrown.code === 'unprocessable')
  ) {
    return new InvalidRequest('The request holds a value that is not allowed.');
  }
  const status = (thrown as { statusCode?: unknown } | null)?.statusCode;
  // A compressed body (src/http/content-encoding.ts): 415 naming the coding, as on every surface.
  if (status === 415 && thrown instanceof DomainError)
    return new OAuthError('invalid_request', thrown.message, 415, { 'Accept-Encoding': 'identity' });
  // The JSON parser's refusal of a body in another charset (JSON is UTF-8): the client's, not a 500.
  if (thrown instanceof DomainError && thrown.code === 'unsupported_media_type')
    return new InvalidRequest(thrown.message);
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413) return new OAuthError('invalid_request', 'The request body is too large.', 413);
    if (status === 415) return new InvalidRequest('The request content type is not supported here.');
    return new InvalidRequest('The request is malformed.');
  }
  if (isStoreUnavailable(thrown) || (thrown instanceof DomainError && thrown.code === 'unavailable')) {
    return new OAuthError(
      'temporarily_unavailable',
      'The authorization server is temporarily unavailable.',
      503,
      {
        'Retry-After': '1',
      },
    );
  }
  return new ServerError();
}

/** Token responses and errors must never be cached (RFC 6749 §5.1). */
export function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
}

/** The caller's address for per-address brute-force limits. */
export function sourceAddress(request: FastifyRequest): string {
  return request.ip || 'unknown';
}
