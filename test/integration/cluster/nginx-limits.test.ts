import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceBodyLimit } from '../../../src/cluster/cluster.js';
import { CLIENT_TIMEOUT_S, nginxBodyLimit } from '../../../src/cluster/nginx-config.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { missingPrerequisite, startTestCluster, type TestCluster, until } from './support.js';

/**
 * nginx's limits as real clients meet them: a gRPC client stream whose messages, each under
 * BODY_LIMIT_BYTES, add up past the HTTP server's body backstop, and HTTP clients that stall in
 * their request head or body past nginx's client timeouts.
 */
const skip = await missingPrerequisite();

/** BODY_LIMIT_BYTES as the cluster's instances run with it (the default here). */
const LIMIT = instanceBodyLimit(process.env);

/** Server reflection (bidirectional streaming), from @grpc/reflection's own proto, as a client builds it. */
const reflectionProto = fileURLToPath(
  new URL(
    '../../../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto',
    import.meta.url,
  ),
);
type ClientCtor = new (address: string, credentials: grpc.ChannelCredentials) => grpc.Client;
const reflection = grpc.loadPackageDefinition(
  loadSync(reflectionProto, { keepCase: true, defaults: true, oneofs: true }),
) as unknown as { grpc: { reflection: { v1: { ServerReflection: ClientCtor } } } };
type ReflectionClient = grpc.Client & {
  ServerReflectionInfo(
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
  ): grpc.ClientDuplexStream<
    { host: string; list_services: string },
    { list_services_response?: { service: { name: string }[] } }
  >;
};

interface StreamResult {
  answers: number;
  services: string[];
  status?: grpc.StatusObject;
  error?: grpc.ServiceError;
}

/**
 * One reflection stream: `sizes.length` list_services requests, each padded by `host` to its size;
 * `inTurn`, each written once the one before is answered (otherwise as fast as the stream takes them).
 */
async function reflectionStream(address: string, sizes: number[], inTurn = false): Promise<StreamResult> {
  const client = new reflection.grpc.reflection.v1.ServerReflection(
    address,
    grpc.credentials.createInsecure(),
  ) as ReflectionClient;
  try {
    const call = client.ServerReflectionInfo(new grpc.Metadata(), { deadline: Date.now() + 60_000 });
    const result: StreamResult = { answers: 0, services: [] };
    call.on('data', (d: { list_services_response?: { service: { name: string }[] } }) => {
      result.answers++;
      result.services = (d.list_services_response?.service ?? []).map((s) => s.name);
    });
    // The status comes once the stream has ended both ways; an error is a status too (grpc-js).
    const ended = new Promise<void>((resolve) => {
      call.on('status', (status: grpc.StatusObject) => {
        result.status = status;
        resolve();
      });
      call.on('error', (error: grpc.ServiceError) => {
        result.error = error;
      });
    });
    for (const [i, size] of sizes.entries()) {
      if (inTurn) await until(() => result.answers >= i || result.status !== undefined);
      // `host` (field 1: a tag byte and a 3-byte length for 16 KiB to 2 MiB) pads the request to
      // `size` bytes; `list_services: ''` (field 7) is a tag byte and a zero length.
      const padding = size - 1 - 3 - 2;
      if (!call.write({ host: 'h'.repeat(padding), list_services: '' }))
        await new Promise((r) => call.once('drain', r));
    }
    call.end();
    await ended;
    return result;
  } finally {
    client.close();
  }
}

/**
 * A raw HTTP/1.1 request that stops after `sent` (a head without its blank line, or a head and part
 * of the body it announced), `then` optionally sent after `pauseMs`: what the connection received
 * before nginx closed it, and when.
 */
function stalled(
  httpUrl: string,
  sent: string,
  then?: { pauseMs: number; rest: string },
): Promise<{ received: string; afterMs: number }> {
  const { hostname, port } = new URL(httpUrl);
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(sent);
      if (then) setTimeout(() => socket.write(then.rest), then.pauseMs);
    });
    let received = '';
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      // A complete answer (a body with content-length) is enough; keep-alive would hold it open.
      const length = /\r\ncontent-length: (\d+)\r\n/i.exec(received)?.[1];
      const body = received.indexOf('\r\n\r\n');
      if (length !== undefined && body >= 0 && received.length >= body + 4 + Number(length)) socket.end();
    });
    // Closed or reset, it is the same to the client: no answer. 'close' follows an error.
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ received, afterMs: Date.now() - started }));
  });
}

const post = (path: string, type: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: atrium.test\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\nX-Request-Id: stall-1\r\n\r\n`;

describe.skipIf(skip)('nginx limits, as real clients meet them', { timeout: 300_000 }, () => {
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

  it("gRPC: a client stream whose messages add up past the HTTP server's backstop is answered whole", async () => {
    // Each message under BODY_LIMIT_BYTES, together more than BODY_LIMIT_BYTES + 1 MiB: nginx sets
    // no limit on gRPC (it could only count the sum, and cut the stream with a bare RST_STREAM once
    // the instance had answered); the instance limits each message.
    const size = LIMIT - 1024;
    const count = Math.ceil(nginxBodyLimit(LIMIT) / size) + 1;
    const sizes = Array.from({ length: count }, () => size);
    expect(sizes.reduce((a, b) => a + b, 0)).toBeGreaterThan(nginxBodyLimit(LIMIT));

    const result = await reflectionStream(env.cluster.grpcAddress, sizes);
    expect(result.error).toBeUndefined();
    expect(result.status?.code, result.status?.details).toBe(grpc.status.OK);
    expect(result.answers).toBe(count);
    expect(result.services).toContain('users.v1.UserService');
  });

  it('gRPC: a message over BODY_LIMIT_BYTES in a client stream is the instance’s RESOURCE_EXHAUSTED', async () => {
    // After messages the instance has answered: the refusal is a gRPC status in trailers all the
    // same, never a reset or an HTML page.
    const result = await reflectionStream(
      env.cluster.grpcAddress,
      [LIMIT - 1024, LIMIT - 1024, LIMIT + 1],
      true,
    );
    expect(result.answers).toBe(2);
    expect(result.error?.code, result.error?.details).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(result.error?.details).toBe(`Received message larger than max (${LIMIT + 1} vs ${LIMIT})`);
  });

  it(
    'a request stalled in its head or body: nginx closes the connection after its client timeout, without a byte',
    { timeout: 30_000 },
    async () => {
      // nginx never answers 408 (whatever error_page says): past client_header_timeout or
      // client_body_timeout it closes the connection, on every surface alike. So no surface's 408
      // shape exists to assert; what matters is that no client gets nginx's HTML page, and that a
      // stalled client is let go in CLIENT_TIMEOUT_S, not nginx's default 60 s.
      const url = env.cluster.httpUrl;
      const json = 'application/json';
      const form = 'application/x-www-form-urlencoded';
      const cases = {
        head: stalled(url, 'GET /v1/users HTTP/1.1\r\nHost: atrium.test\r\n'),
        rest: stalled(url, `${post('/api/v2/orders', json, 100)}{"a":`),
        users: stalled(url, `${post('/v1/users', json, 100)}{"a":`),
        graphql: stalled(url, `${post('/graphql', json, 100)}{"query":`),
        token: stalled(url, `${post('/oauth/token', form, 100)}grant_type=`),
        authorize: stalled(url, `${post('/authorize', form, 100)}response_type=`),
      };
      // A client that pauses less than the timeout between two parts of its body is answered.
      const query = JSON.stringify({ query: '{ __typename }' });
      const paused = stalled(url, `${post('/graphql', json, query.length)}${query.slice(0, 5)}`, {
        pauseMs: 3000,
        rest: query.slice(5),
      });

      for (const [name, outcome] of Object.entries(cases)) {
        const { received, afterMs } = await outcome;
        expect(received, name).toBe('');
        expect(afterMs, name).toBeGreaterThanOrEqual(CLIENT_TIMEOUT_S * 1000 - 500);
        expect(afterMs, name).toBeLessThan(CLIENT_TIMEOUT_S * 1000 + 5000);
      }
      const answered = await paused;
      expect(answered.received).toMatch(/^HTTP\/1\.1 200 /);
      expect(answered.received).toContain('{"data":{"__typename":"Query"}}');
    },
  );
});
