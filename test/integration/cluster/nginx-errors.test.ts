import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { existsSync } from 'node:fs';
import * as http2 from 'node:http2';
import { join } from 'node:path';
import { connect } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceBodyLimit } from '../../../src/cluster/cluster.js';
import { nginxBodyLimit } from '../../../src/cluster/nginx-config.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { BUF, bufCurl, REFLECTED_METHODS, root, unary, userServiceClient } from '../grpc/support.js';
import {
  expectNginxJson,
  expectNginxRestError,
  missingPrerequisite,
  startTestCluster,
  type TestCluster,
} from './support.js';

/**
 * What clients get when nginx answers by itself (an instance down, a body over nginx's limit): the
 * error shape of the surface they asked, never nginx's HTML page. Real nginx, real roles, stopped
 * for real; the clients are plain fetch and grpc-js.
 */
const skip = await missingPrerequisite();

/** BODY_LIMIT_BYTES as the cluster's instances run with it (the default here). */
const LIMIT = instanceBodyLimit(process.env);
const MiB = 1024 * 1024;
/** Over nginx's client_max_body_size (its backstop above LIMIT), so nginx refuses it itself. */
const TOO_BIG = nginxBodyLimit(LIMIT) + MiB;

/** `buf curl` (Go, connect-go's gRPC client), from npm's @bufbuild/buf; see test/integration/grpc/buf-curl.test.ts. */
const bufPresent = existsSync(BUF);
if (!skip && !bufPresent && process.env.CI)
  throw new Error(`buf is missing (${BUF}); npm install provides it`);
/** buf curl's exit code for a gRPC status: the code shifted left by three. */
const bufExit = (code: grpc.status) => code << 3;

describe.skipIf(skip)('nginx answers in the spec shapes', { timeout: 300_000 }, () => {
  let env: TestCluster;
  beforeAll(async () => {
    env = await startTestCluster({
      layout: { api: 1, auth: 1, grpc: 1, worker: 0 },
      redisUrl: TEST_REDIS_URL,
    });
  }, 300_000);
  afterAll(async () => {
    await env?.stop();
  });

  const url = (path: string) => `${env.cluster.httpUrl}${path}`;

  it('a body over the limit: 413 in the REST shape (the user API in its upper case) and GraphQL shape', async () => {
    const body = Buffer.alloc(TOO_BIG, 'a');
    const post = (path: string) =>
      fetch(url(path), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'big-body-1' },
        body,
      });

    await expectNginxRestError(await post('/api/v2/orders'), 413, {
      error: 'payload_too_large',
      message: 'The request body is larger than the limit.',
      request_id: 'big-body-1',
    });

    const users = await post('/v1/users');
    expect(users.status).toBe(413);
    expectNginxJson(users);
    expect(((await users.json()) as { error: string }).error).toBe('PAYLOAD_TOO_LARGE');

    const graphql = await post('/graphql');
    expect(graphql.status).toBe(413);
    expectNginxJson(graphql);
    expect(await graphql.json()).toEqual({
      errors: [
        { message: 'The request body is larger than the limit.', extensions: { code: 'PAYLOAD_TOO_LARGE' } },
      ],
    });
  });

  it('a body up to BODY_LIMIT_BYTES, and one just over it, is the instance’s to answer, not nginx’s', async () => {
    const post = (bytes: number, id: string) =>
      fetch(url('/graphql'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': id },
        body: Buffer.alloc(bytes, 'a'),
      });
    // The instances' security headers tell their answers from nginx's own pages, which lack them.
    const fromInstance = (res: Response) => res.headers.get('x-frame-options') === 'DENY';

    const at = await post(LIMIT, 'http-at-limit');
    expect(at.status).not.toBe(413);
    expect(fromInstance(at)).toBe(true);
    expect(at.headers.get('x-request-id')).toBe('http-at-limit');

    const over = await post(LIMIT + 1, 'http-over-limit');
    expect(over.status).toBe(413);
    expect(fromInstance(over)).toBe(true);
    expect(over.headers.get('x-request-id')).toBe('http-over-limit');
    // The instance's own 413 on /graphql is a GraphQL error, the shape nginx gives over its limit.
    expect(await over.json()).toEqual({
      errors: [
        { message: 'The request body is larger than the limit.', extensions: { code: 'PAYLOAD_TOO_LARGE' } },
      ],
    });

    const far = await post(TOO_BIG, 'http-far-over');
    expect(far.status).toBe(413);
    expect(fromInstance(far)).toBe(false);
    expectNginxJson(far);
  });

  it('gRPC: a message at BODY_LIMIT_BYTES reaches the instance, which refuses one over it, even far over', async () => {
    const client = userServiceClient(env.cluster.grpcAddress);
    try {
      // GetUserRequest { user_id = 1 }: a tag byte and a 3-byte length (ids of 16 KiB to 2 MiB)
      // before the id, so the message is `bytes` long; gRPC frames it in 5 bytes more.
      const getUser = (bytes: number, id: string) =>
        unary(
          client,
          'GetUser',
          { user_id: 'u'.repeat(bytes - 4) },
          { 'x-request-id': id },
          { deadline: Date.now() + 60_000 },
        );

      // At the limit: the instance reads it, and answers (no credentials) in its own words.
      const at = await getUser(LIMIT, 'grpc-at-limit');
      expect(at.error?.code, at.error?.details).toBe(grpc.status.UNAUTHENTICATED);
      expect(at.error?.metadata.get('x-request-id')).toEqual(['grpc-at-limit']);

      // One byte over: the instance's RESOURCE_EXHAUSTED (grpc-js names both sizes), not nginx's.
      const over = await getUser(LIMIT + 1, 'grpc-over-limit');
      expect(over.error?.code, over.error?.details).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(over.error?.details).toBe(`Received message larger than max (${LIMIT + 1} vs ${LIMIT})`);

      // Far over nginx's backstop too: still the instance's answer, a gRPC status and never an HTML
      // page. grpc-js refuses on reading the message's length prefix, long before nginx has counted
      // the body (passed on as it comes, under HTTP/2 flow control) past its limit.
      const far = await getUser(TOO_BIG, 'grpc-far-over');
      expect(far.error?.code, far.error?.details).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(far.error?.details).toMatch(
        new RegExp(`^Received message larger than max \\(\\d+ vs ${LIMIT}\\)$`),
      );
    } finally {
      client.close();
    }
  });

  it('a request nginx cannot parse: 400 in the REST shape, as Atrium answers one', async () => {
    // Not HTTP at all: nginx refuses it before it has a URI or a location.
    const { hostname, port } = new URL(env.cluster.httpUrl);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write('GARBAGE\r\n\r\n'));
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
      socket.on('error', reject);
      socket.on('close', () => resolve(text));
    });
    const [head = '', body = ''] = raw.split('\r\n\r\n');
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1]);
    const type = /^content-type: ([^\r]+)/im.exec(head)?.[1];
    expect(status).toBe(400);
    expect(type).toBe('application/json; charset=utf-8');
    expect(JSON.parse(body)).toMatchObject({
      error: 'validation_error',
      message: 'The request is malformed.',
      request_id: expect.stringMatching(/^req_[0-9a-f]{32}$/),
      details: [{ field: null, code: 'malformed_request' }],
    });
  });

  it('a request head over nginx’s buffers: 431 in REST’s shape, as Atrium’s parser answers, with no reason phrase', async () => {
    // nginx calls a header line over large_client_header_buffers (8k) 494 and a request line over
    // them 414; both answer 431, as Atrium's own parser does for a head over 16 KB. nginx has no
    // reason phrase for 431 (its table ends at 429) and stock nginx cannot be given one, so the
    // status line is `HTTP/1.1 431 ` with the phrase empty, which HTTP/1.1 allows and clients ignore
    // (docs/deployment.md). The body is what says what went wrong.
    const { hostname, port } = new URL(env.cluster.httpUrl);
    const raw = (request: string) =>
      new Promise<{ statusLine: string; headers: string; body: string }>((resolve, reject) => {
        const socket = connect(Number(port), hostname, () => socket.write(request));
        let text = '';
        socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => {
          const at = text.indexOf('\r\n\r\n');
          const head = text.slice(0, at);
          const [statusLine = '', ...headers] = head.split('\r\n');
          resolve({ statusLine, headers: headers.join('\n'), body: text.slice(at + 4) });
        });
      });
    const big = 'a'.repeat(9 * 1024);
    const header = await raw(
      `GET /api/v2/orders HTTP/1.1\r\nHost: atrium.test\r\nX-Request-Id: head-1\r\nX-Big: ${big}\r\n\r\n`,
    );
    expect(header.statusLine).toBe('HTTP/1.1 431 ');
    expect(header.headers).toMatch(/^content-type: application\/json; charset=utf-8$/im);
    expect(header.headers).toMatch(/^connection: close$/im);
    expect(JSON.parse(header.body)).toEqual({
      error: 'request_header_fields_too_large',
      message: 'The request was refused: Request Header Fields Too Large.',
      // nginx had read the id's line before the one over its buffers.
      request_id: 'head-1',
      details: [],
    });

    // nginx refuses the head before it has chosen a location, so the server's page answers, in
    // REST's shape whatever the path: as Atrium's own parser does, before any routing.
    const rest = {
      error: 'request_header_fields_too_large',
      message: 'The request was refused: Request Header Fields Too Large.',
      request_id: expect.stringMatching(/^req_[0-9a-f]{32}$/),
      details: [],
    };
    const graphql = await raw(`POST /graphql HTTP/1.1\r\nHost: atrium.test\r\nX-Big: ${big}\r\n\r\n`);
    expect(graphql.statusLine).toBe('HTTP/1.1 431 ');
    expect(JSON.parse(graphql.body)).toEqual(rest);

    const line = await raw(`GET /graphql?q=${big} HTTP/1.1\r\nHost: atrium.test\r\n\r\n`);
    expect(line.statusLine).toBe('HTTP/1.1 431 ');
    expect(line.headers).toMatch(/^content-type: application\/json; charset=utf-8$/im);
    expect(JSON.parse(line.body)).toEqual(rest);
  });

  it('the request id nginx quotes is the one it forwards: an instance answers with it', async () => {
    const kept = await fetch(url('/v1/users/nope'), { headers: { 'x-request-id': 'client-id.7' } });
    expect(kept.headers.get('x-request-id')).toBe('client-id.7');
    // A malformed one is replaced by nginx, and the instance keeps nginx's.
    const replaced = await fetch(url('/v1/users/nope'), { headers: { 'x-request-id': 'not ok!' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
    expect(((await replaced.json()) as { request_id: string }).request_id).toBe(
      replaced.headers.get('x-request-id'),
    );
  });

  it('gRPC: a message far over the limit sent with a content-length is the instance’s RESOURCE_EXHAUSTED', async () => {
    // grpc-go, connect-go and so `buf curl` send content-length on a unary call. nginx sets no
    // limit of its own on gRPC (it could only count the whole body), so the instance refuses the
    // message on reading its length prefix, as it does for grpc-js above; earlier, nginx refused
    // it at once and its error page, discarding that body, met the limit again (HTML 413).
    const size = TOO_BIG;
    const session = http2.connect(`http://${env.cluster.grpcAddress}`);
    try {
      const { headers, trailers } = await new Promise<{
        headers: http2.IncomingHttpHeaders;
        trailers: http2.IncomingHttpHeaders;
      }>((resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': '/users.v1.UserService/UpdateUser',
          'content-type': 'application/grpc',
          'content-length': String(size),
          'x-request-id': 'grpc-content-length',
          te: 'trailers',
        });
        let headers: http2.IncomingHttpHeaders = {};
        let trailers: http2.IncomingHttpHeaders = {};
        stream.on('response', (h) => (headers = h));
        stream.on('trailers', (t) => (trailers = t));
        stream.on('close', () => resolve({ headers, trailers }));
        stream.on('error', reject);
        stream.resume();
        // One gRPC message: the compressed flag, its length, then the message.
        const body = Buffer.alloc(size);
        body.writeUInt32BE(size - 5, 1);
        stream.end(body);
      });
      const status = { ...headers, ...trailers };
      expect(headers[':status']).toBe(200);
      expect(headers['content-type']).toMatch(/^application\/grpc/);
      expect(status['grpc-status'], String(status['grpc-message'])).toBe(
        String(grpc.status.RESOURCE_EXHAUSTED),
      );
      // grpc-message is percent-encoded on the wire.
      expect(decodeURIComponent(String(status['grpc-message']))).toMatch(
        new RegExp(`^Received message larger than max \\(\\d+ vs ${LIMIT}\\)$`),
      );
    } finally {
      session.close();
    }
  });

  describe.skipIf(!bufPresent)('buf curl through nginx’s gRPC port', () => {
    // An independent client (connect-go's gRPC over h2c with prior knowledge, as docs/grpc.md calls
    // it) that learns the schema from server reflection, a bidirectional stream, through nginx.
    async function member() {
      const handle = `b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
      const user = await env.services.core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: `Buf ${handle}`,
        role: 'member',
      });
      const { key } = await env.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
      return { user, key };
    }

    it('lists the services and methods by reflection', async () => {
      const { code, stdout, stderr } = await bufCurl(env.cluster.grpcAddress, '', ['--list-methods']);
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(stdout.trim().split('\n').sort()).toEqual(REFLECTED_METHODS);
    });

    it('checks health without credentials', async () => {
      for (const service of ['', 'users.v1.UserService']) {
        const { code, stdout, stderr } = await bufCurl(
          env.cluster.grpcAddress,
          '/grpc.health.v1.Health/Check',
          ['-d', JSON.stringify({ service })],
        );
        expect(stderr, service).toBe('');
        expect(code, service).toBe(0);
        expect(JSON.parse(stdout), service).toEqual({ status: 'SERVING' });
      }
    });

    it('calls GetUser with an API key, the schema from reflection', async () => {
      const { user, key } = await member();
      const { code, stdout, stderr } = await bufCurl(
        env.cluster.grpcAddress,
        '/users.v1.UserService/GetUser',
        [
          '-v',
          '-H',
          `x-api-key: ${key}`,
          '-H',
          'x-request-id: buf-get-1',
          '-d',
          JSON.stringify({ user_id: user.id }),
        ],
      );
      expect(code, stderr).toBe(0);
      // -v prints the response's headers: the id nginx forwarded is the one the instance answers.
      expect(stderr).toMatch(/^buf: < \(#\d+\) X-Request-Id: buf-get-1$/m);
      expect(JSON.parse(stdout)).toEqual({
        id: user.id,
        name: user.name,
        email: user.email,
        role: 'member',
        createdAt: String(Math.floor(Date.parse(user.createdAt) / 1000)),
        organizationId: user.organizationId,
      });
    });

    it('sees the instance’s status codes and messages: UNAUTHENTICATED, NOT_FOUND, INVALID_ARGUMENT', async () => {
      const { key } = await member();
      const absent = 'usr_00000000000000000000000000';

      const none = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/GetUser', [
        '-d',
        JSON.stringify({ user_id: absent }),
      ]);
      expect(none.stdout).toBe('');
      expect(none.code, none.stderr).toBe(bufExit(grpc.status.UNAUTHENTICATED));
      expect(JSON.parse(none.stderr)).toMatchObject({ code: 'unauthenticated' });

      const notFound = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/GetUser', [
        '-H',
        `x-api-key: ${key}`,
        '-d',
        JSON.stringify({ user_id: absent }),
      ]);
      expect(notFound.code, notFound.stderr).toBe(bufExit(grpc.status.NOT_FOUND));
      expect(JSON.parse(notFound.stderr)).toEqual({
        code: 'not_found',
        message: `User ${absent} not found.`,
      });

      // The spec's InvalidArgument for an empty user_id.
      const empty = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/GetUser', [
        '-H',
        `x-api-key: ${key}`,
        '-d',
        '{"user_id":""}',
      ]);
      expect(empty.code, empty.stderr).toBe(bufExit(grpc.status.INVALID_ARGUMENT));
      expect(JSON.parse(empty.stderr)).toMatchObject({ code: 'invalid_argument' });

      // The field violations come in the binary grpc-status-details-bin trailer, passed on by nginx.
      const mask = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/UpdateUser', [
        '-H',
        `x-api-key: ${key}`,
        '-d',
        JSON.stringify({ user_id: absent, update_mask: 'nickname' }),
      ]);
      expect(mask.code, mask.stderr).toBe(bufExit(grpc.status.INVALID_ARGUMENT));
      const body = JSON.parse(mask.stderr) as { code: string; details: { type: string }[] };
      expect(body.code).toBe('invalid_argument');
      expect(body.details.map((d) => d.type)).toEqual(['google.rpc.BadRequest']);
    });

    it('UpdateUser with a FieldMask, and a ListUsers stream', async () => {
      const { user, key } = await member();
      const update = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/UpdateUser', [
        '-H',
        `x-api-key: ${key}`,
        '-d',
        JSON.stringify({ user_id: user.id, name: 'Through Nginx', update_mask: 'name' }),
      ]);
      expect(update.stderr).toBe('');
      expect(update.code).toBe(0);
      expect(JSON.parse(update.stdout)).toMatchObject({ id: user.id, name: 'Through Nginx' });

      const list = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/ListUsers', [
        '-H',
        `x-api-key: ${key}`,
        '-d',
        '{"limit":2}',
      ]);
      expect(list.stderr).toBe('');
      expect(list.code).toBe(0);
      const ids = [...list.stdout.matchAll(/"id": "(usr_[^"]+)"/g)].map((m) => m[1]);
      expect(ids).toEqual((await env.services.core.users.page(SYSTEM_ACTOR, { limit: 2 })).map((u) => u.id));
    });
  });

  it('gRPC with its instance down: UNAVAILABLE as a gRPC status, never an HTML page', async () => {
    await env.cluster.process('grpc-1').child.stop('SIGTERM');
    const client = userServiceClient(env.cluster.grpcAddress);
    try {
      const { err, headers } = await new Promise<{
        err: grpc.ServiceError;
        headers: Record<string, unknown>;
      }>((resolve) => {
        let headers: Record<string, unknown> = {};
        const call = client.GetUser!(
          { id: 'usr_1' },
          new grpc.Metadata(),
          { deadline: Date.now() + 10_000 },
          (err: grpc.ServiceError) => resolve({ err, headers }),
        ) as grpc.ClientUnaryCall;
        call.on('metadata', (md: grpc.Metadata) => (headers = md.getMap()));
      });
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toBe('The service is unavailable right now; retry shortly.');
      expect(err.details).not.toMatch(/html/i);
      // Trailers-only: the status came in nginx's one HEADERS frame, with gRPC's content type.
      const trailers = err.metadata.getMap();
      expect(trailers['content-type'] ?? headers['content-type']).toBe('application/grpc');
      expect(trailers['server']).toBe('nginx');
      expect(String(trailers['x-request-id'])).toMatch(/^req_[0-9a-f]{32}$/);
    } finally {
      client.close();
    }
  });

  it.skipIf(!bufPresent)(
    'buf curl with the gRPC instance down: UNAVAILABLE with nginx’s message, given the schema',
    async () => {
      // (Already down after the test before.) Reflection has no server to ask, so buf curl cannot
      // resolve the method (docs/grpc.md); with the schema from proto/ it sends the call and
      // reports the status nginx answered.
      await env.cluster.process('grpc-1').child.stop('SIGTERM');
      const schema = join(root, 'proto');
      const down = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/GetUser', [
        '--schema',
        schema,
        '-d',
        '{"user_id":"usr_00000000000000000000000000"}',
      ]);
      expect(down.stdout).toBe('');
      expect(down.code, down.stderr).toBe(bufExit(grpc.status.UNAVAILABLE));
      expect(JSON.parse(down.stderr)).toEqual({
        code: 'unavailable',
        message: 'The service is unavailable right now; retry shortly.',
      });

      const reflected = await bufCurl(env.cluster.grpcAddress, '/users.v1.UserService/GetUser', ['-d', '{}']);
      expect(reflected.code).not.toBe(0);
      expect(reflected.stderr).toContain('failed to find service named "users.v1.UserService" in schema');
    },
  );

  it('REST, GraphQL and the token server with their instances down: 502 in each one’s shape', async () => {
    await env.cluster.process('api-1').child.stop('SIGTERM');
    await env.cluster.process('auth-1').child.stop('SIGTERM');

    const rest = await fetch(url('/v1/users/usr_1'), { headers: { 'x-request-id': 'down-1' } });
    expect(rest.headers.get('retry-after')).toBe('2');
    await expectNginxRestError(rest, 502, {
      error: 'service_unavailable',
      message: 'The service is unavailable right now; retry shortly.',
      request_id: 'down-1',
    });

    const graphql = await fetch(url('/graphql'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(graphql.status).toBe(502);
    expectNginxJson(graphql);
    expect(await graphql.json()).toEqual({
      errors: [
        {
          message: 'The service is unavailable right now; retry shortly.',
          extensions: { code: 'SERVICE_UNAVAILABLE' },
        },
      ],
    });

    const token = await fetch(url('/oauth/token'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    expect(token.status).toBe(502);
    expectNginxJson(token);
    expect(await token.json()).toEqual({
      error: 'temporarily_unavailable',
      error_description: 'The authorization server is temporarily unavailable.',
    });

    // /authorize is a page a person reads: a page, not JSON and not nginx's own.
    const page = await fetch(url('/authorize?response_type=code'));
    expect(page.status).toBe(502);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('The service is temporarily unavailable');
  });
});
