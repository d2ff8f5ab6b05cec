import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { until } from '../../helpers/wait.js';
import { listeningAtrium } from './support.js';

/**
 * Requests to /graphql/stream with nothing to parse: an empty body under each content type, a body
 * of whitespace, `Content-Length: 0` with and without a content type, an empty chunked body, a GET
 * without a query. Each must be answered at once (the route has no deadline, so a request graphql-sse
 * waits on stays open until shutdown), in the shape and status POST /graphql answers the same
 * mistake with, and must leave nothing open: its access line, written once the handler has let go
 * of the request (and dropped it from the open streams), is logged.
 */

/** Longer than any of these answers takes, far shorter than vitest's timeout: a hang fails here. */
const ANSWER_WITHIN_MS = 3_000;

interface Raw {
  status: number;
  contentType: string | undefined;
  text: string;
}

/** One request over node:http, sent exactly as given (no body means none is written). */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Raw> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], text });
      });
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`${method} ${path} ${JSON.stringify(headers)}: no answer in ${ANSWER_WITHIN_MS} ms`));
    }, ANSWER_WITHIN_MS);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const INVALID_JSON = {
  errors: [{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }],
};

describe('/graphql/stream: requests with nothing to parse are answered at once', () => {
  const log = memoryLog('info');
  const server = listeningAtrium({ LOG_LEVEL: 'info' }, { logger: log.logger });

  const accessLines = () =>
    log.lines.filter((l) => l.msg === 'request' && l.route === '/graphql/stream').length;

  /** The request to /graphql/stream, answered; and its access line logged (nothing left open). */
  async function stream(method: string, headers: Record<string, string>, body?: string): Promise<Raw> {
    const before = accessLines();
    const answer = await send(
      server.base,
      method,
      '/graphql/stream',
      { accept: 'text/event-stream', ...headers },
      body,
    );
    await until(
      () => accessLines() > before,
      `the access line of ${method} ${JSON.stringify(headers)}`,
      ANSWER_WITHIN_MS,
    );
    return answer;
  }

  const json = (raw: Raw): unknown => JSON.parse(raw.text);

  it.each([
    ['empty, Content-Length: 0', { 'content-type': 'application/json', 'content-length': '0' }, ''],
    ['empty, charset', { 'content-type': 'application/json; charset=utf-8', 'content-length': '0' }, ''],
    ['empty and chunked', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, ''],
    ['only whitespace', { 'content-type': 'application/json' }, ' \n\t '],
  ])('a JSON POST %s: 400 BAD_REQUEST, as POST /graphql answers it', async (_name, headers, body) => {
    const sse = await stream('POST', headers, body);
    const post = await send(
      server.base,
      'POST',
      '/graphql',
      { ...headers, accept: 'application/json' },
      body,
    );
    expect({ status: post.status, body: json(post) }).toEqual({ status: 400, body: INVALID_JSON });
    expect({ status: sse.status, contentType: sse.contentType, body: json(sse) }).toEqual({
      status: 400,
      contentType: 'application/json; charset=utf-8',
      body: INVALID_JSON,
    });
  });

  it.each([
    ['text/plain', { 'content-type': 'text/plain', 'content-length': '0' }],
    [
      'application/x-www-form-urlencoded',
      { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '0' },
    ],
    ['no content type, Content-Length: 0', { 'content-length': '0' }],
    ['no content type, no length', {}],
  ])('an empty POST, %s: 415, no stream', async (_name, headers) => {
    const sse = await stream('POST', headers, '');
    expect(sse.status).toBe(415);
    expect(sse.contentType).toBe('application/json; charset=utf-8');
    expect(json(sse)).toEqual({
      errors: [
        {
          message: 'Unsupported Content-Type: send the POST body as application/json.',
          extensions: { code: 'BAD_REQUEST' },
        },
      ],
    });
  });

  it.each(['PUT', 'DELETE'])('an empty JSON %s: answered (405), no stream', async (method) => {
    const sse = await stream(method, { 'content-type': 'application/json', 'content-length': '0' });
    expect(sse.status).toBe(405);
  });

  it.each(['null', '[]', '"text"', '0'])(
    'a JSON POST of %s (not an object): 400, no stream',
    async (body) => {
      const sse = await stream('POST', { 'content-type': 'application/json' }, body);
      expect(sse.status).toBe(400);
      expect(sse.contentType ?? '').not.toMatch(/event-stream/);
    },
  );

  it('a GET without a query: 400 BAD_REQUEST, no stream', async () => {
    const sse = await stream('GET', {});
    expect({ status: sse.status, body: json(sse) }).toEqual({
      status: 400,
      body: {
        errors: [
          { message: 'Send a query (or a persisted query hash).', extensions: { code: 'BAD_REQUEST' } },
        ],
      },
    });
  });

  it('twenty empty JSON POSTs at once: each answered, none left open', async () => {
    const before = accessLines();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        send(server.base, 'POST', '/graphql/stream', {
          'content-type': 'application/json',
          'content-length': '0',
          accept: 'text/event-stream',
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(400));
    await until(() => accessLines() >= before + 20, 'twenty access lines', ANSWER_WITHIN_MS);
  });
});
