import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import { errorBody, toDomainError } from './errors.js';
import { genRequestId, SECURITY_HEADERS } from './plugins/request-context.js';

/** Node's HTTP parser errors that have a more exact status than 400 (as Node's own handler does). */
const PARSER_STATUS: Record<string, number> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

/** The status, headers and body of an error answered outside Fastify, in the spec's shape. */
function answer(
  status: number,
  head: boolean,
  message?: string,
  requestId = genRequestId({ headers: {} }),
): { headers: Record<string, string>; body: string } {
  const err = toDomainError(
    Object.assign(new Error(message ?? STATUS_CODES[status] ?? 'Client Error'), { statusCode: status }),
  );
  // A 400's message is listed in its details (`malformed_request`).
  const body = JSON.stringify(errorBody(err, requestId).body);
  return {
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      'x-request-id': requestId,
      ...SECURITY_HEADERS,
      'cache-control': 'no-store',
      // The socket is closed after this answer: the request's framing can no longer be trusted.
      connection: 'close',
    },
    body: head ? '' : body,
  };
}

/**
 * Requests Node refuses before Fastify sees them (an unparseable request line, a NUL in a header,
 * Content-Length beside Transfer-Encoding, more than 16 KB of headers) get the same error shape,
 * request id and security headers as everything else, and `Connection: close`, since the socket is
 * closed right after. Fastify's `clientErrorHandler` option.
 */
export function clientErrorHandler(
  log: () => FastifyBaseLogger,
): NonNullable<FastifyServerOptions['clientErrorHandler']> {
  return (err, socket: Socket): void => {
    if ((err.code as string | undefined) === 'ECONNRESET' || socket.destroyed) return;
    // A response already under way on this connection cannot be followed by another status line.
    const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean; req?: IncomingMessage } })
      ._httpMessage;
    if (!socket.writable || pending?.headersSent) {
      socket.destroy();
      return;
    }
    const status = PARSER_STATUS[err.code] ?? 400;
    // Node hands over the bytes it could not parse (a Buffer, whatever the type says).
    const raw = (err as { rawPacket?: unknown }).rawPacket;
    const head = Buffer.isBuffer(raw) && raw.subarray(0, 5).toString('latin1') === 'HEAD ';
    // A request whose headers were parsed (its body then broke off or was malformed) keeps the
    // client's X-Request-Id by the usual rule (D7); before that there are no headers to read.
    const { headers, body } = answer(status, head, undefined, genRequestId(pending?.req ?? { headers: {} }));
    // `reqId`, as every other HTTP line names it (until 2026-11-28 this one said `requestId`).
    log().info(
      { code: err.code, status, reqId: headers['x-request-id'] },
      'request refused by the HTTP parser',
    );
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join('\r\n')}\r\n\r\n${body}`);
  };
}

/**
 * Answers a request on a socket no HTTP response object owns any more (an upgrade Node handed
 * over, refused before the protocol switch) in the spec's shape, and closes the socket.
 */
export function refuseOnSocket(
  socket: Duplex,
  status: number,
  message: string,
  extra: Record<string, string> = {},
): void {
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  const { headers, body } = answer(status, false, message);
  const lines = Object.entries({ ...headers, ...extra }).map(([k, v]) => `${k}: ${v}`);
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join('\r\n')}\r\n\r\n${body}`);
}

/**
 * `Expect: 100-continue` (curl sends it for any body over 1 KiB): Node answers 100 at once unless
 * someone listens for it, so a client refused before its body mattered (401, 413 by its declared
 * length, 415) uploaded the whole body first. The 100 is now sent when a route starts reading the
 * body ('resume': the parser turning the stream on). A request answered before that gets its answer
 * instead, and Node closes the connection, since the body it declared never came. The answer having
 * started is checked because Node turns an unread body on too, to discard it, after the response.
 */
export function continueWhenBodyIsRead(server: Server): void {
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    request.once('resume', () => {
      if (!response.headersSent && !response.writableEnded) response.writeContinue();
    });
    server.emit('request', request, response);
  });
}

/**
 * An `Expect` other than `100-continue` is 417 (RFC 9110 §10.1.1). Node answers it by itself with
 * an empty body unless someone listens for it; this is that listener.
 */
export function answerUnmetExpectations(server: Server): void {
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const { headers, body } = answer(417, request.method === 'HEAD');
    response.shouldKeepAlive = false;
    response.writeHead(417, headers);
    response.end(body);
  });
}
