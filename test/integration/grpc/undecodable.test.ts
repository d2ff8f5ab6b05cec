import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNDECODABLE_MESSAGE } from '../../../src/grpc/undecodable.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { grpc, handledMetrics, metadataFor, startGrpcAtrium, type GrpcAtrium } from './support.js';

const { status } = grpc;
/** Not a protobuf message: a varint tag that never ends. */
const BAD = Buffer.from([0xff, 0xff, 0xff]);
const identity = (b: Buffer): Buffer => b;

interface RawResult {
  code: number;
  details: string;
  /** Trailers (a refused call answers trailers only). */
  trailers: grpc.Metadata;
  messages: number;
}

/**
 * A call made with grpc-js's raw client and an identity serializer, so the server receives exactly
 * `bytes` as the request message: what a client with a broken encoder, or none, sends.
 */
function rawCall(
  client: grpc.Client,
  method: string,
  kind: 'unary' | 'server_stream',
  bytes: Buffer,
  headers: Record<string, string>,
): Promise<RawResult> {
  const path = `/users.v1.UserService/${method}`;
  return new Promise((resolve) => {
    let messages = 0;
    const call =
      kind === 'unary'
        ? client.makeUnaryRequest(path, identity, identity, bytes, metadataFor(headers), (err) => {
            if (err) return;
            messages += 1;
          })
        : client.makeServerStreamRequest(path, identity, identity, bytes, metadataFor(headers));
    if (kind === 'server_stream') {
      (call as grpc.ClientReadableStream<Buffer>).on('data', () => (messages += 1));
      (call as grpc.ClientReadableStream<Buffer>).on('error', () => undefined);
    }
    call.on('status', (s: grpc.StatusObject) =>
      setImmediate(() => resolve({ code: s.code, details: s.details, trailers: s.metadata, messages })),
    );
  });
}

/** Issue: bad request bytes got grpc-js's own INTERNAL, with no request id, log line or metric. */
describe('gRPC request message that cannot be decoded', () => {
  const log = memoryLog('info');
  let atrium: GrpcAtrium;
  let raw: grpc.Client;
  let caller: Awaited<ReturnType<GrpcAtrium['caller']>>;

  beforeAll(async () => {
    atrium = await startGrpcAtrium({}, { logger: log.logger });
    raw = new grpc.Client(atrium.address, grpc.credentials.createInsecure());
    caller = await atrium.caller({ role: 'admin' });
  });
  afterAll(async () => {
    raw?.close();
    await atrium?.stop();
  });

  it.each([
    ['GetUser', 'unary'],
    ['ListUsers', 'server_stream'],
    ['UpdateUser', 'unary'],
    ['StreamUserActivity', 'server_stream'],
  ] as const)(
    '%s (%s): INVALID_ARGUMENT with the x-request-id, one access line and the metrics',
    async (method, kind) => {
      const requestId = `undecodable-${method}`;
      const before = log.lines.length;
      const result = await rawCall(raw, method, kind, BAD, { ...caller.headers, 'x-request-id': requestId });
      expect(result.code).toBe(status.INVALID_ARGUMENT);
      expect(result.details).toBe('The request message could not be decoded.');
      expect(result.trailers.get('x-request-id')).toEqual([requestId]);
      expect(result.messages).toBe(0);

      const metrics = await handledMetrics(atrium, method, 'INVALID_ARGUMENT');
      expect(metrics).toMatch(
        new RegExp(
          `atrium_grpc_server_handled_total\\{grpc_service="users.v1.UserService",grpc_method="${method}",grpc_type="${kind}",grpc_code="INVALID_ARGUMENT"\\} 1`,
        ),
      );
      expect(metrics).toMatch(
        new RegExp(`atrium_grpc_server_started_total\\{[^}]*grpc_method="${method}"[^}]*\\} 1`),
      );
      const lines = log.lines.slice(before);
      expect(lines.filter((l) => l.msg === 'grpc call')).toEqual([
        expect.objectContaining({
          rpc: `/users.v1.UserService/${method}`,
          code: 'INVALID_ARGUMENT',
          request_id: requestId,
        }),
      ]);
      // Not a server fault: nothing logged as one, by Atrium or by grpc-js.
      expect(lines.filter((l) => l.msg !== 'grpc call')).toEqual([]);
    },
  );

  it('is refused before authentication: no credentials, or bad ones, get the same answer and a request id', async () => {
    const tries: Array<Record<string, string>> = [{}, { 'x-api-key': 'atr_test_not_a_key' }];
    for (const headers of tries) {
      const result = await rawCall(raw, 'GetUser', 'unary', BAD, headers);
      expect(result.code).toBe(status.INVALID_ARGUMENT);
      expect(result.trailers.get('x-request-id')[0]).toMatch(/\S/);
    }
  });

  it('leaves well-formed bytes alone: a GetUser encoded by hand is answered', async () => {
    // Field 1 (user_id), length-delimited.
    const id = Buffer.from(caller.userId);
    const bytes = Buffer.concat([Buffer.from([0x0a, id.length]), id]);
    const result = await rawCall(raw, 'GetUser', 'unary', bytes, caller.headers);
    expect(result.code).toBe(status.OK);
    expect(result.messages).toBe(1);
  });

  describe('on the services whose handlers come from libraries (health, reflection)', () => {
    it.each([
      ['/grpc.health.v1.Health/Check', 'unary'],
      ['/grpc.health.v1.Health/Watch', 'server_stream'],
    ] as const)("%s: INVALID_ARGUMENT, not grpc-js's INTERNAL", async (path, kind) => {
      const result = await rawPathCall(raw, path, kind, BAD);
      expect(result).toEqual({ code: status.INVALID_ARGUMENT, details: UNDECODABLE_MESSAGE, messages: 0 });
    });

    it.each(['v1', 'v1alpha'])(
      'reflection %s: an undecodable message ends the stream with INVALID_ARGUMENT; a good one is still answered',
      async (version) => {
        const path = `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`;
        const bad = await bidiCall(raw, path, [BAD]);
        expect(bad).toEqual({ code: status.INVALID_ARGUMENT, details: UNDECODABLE_MESSAGE, messages: 0 });
        // ServerReflectionRequest { list_services (7): "" }
        const good = await bidiCall(raw, path, [Buffer.from([0x3a, 0x00])]);
        expect(good).toEqual({ code: status.OK, details: expect.any(String), messages: 1 });
      },
    );

    it('a well-formed health Check is still answered', async () => {
      const result = await rawPathCall(raw, '/grpc.health.v1.Health/Check', 'unary', Buffer.alloc(0));
      expect(result).toEqual({ code: status.OK, details: expect.any(String), messages: 1 });
    });
  });
});

function rawPathCall(
  client: grpc.Client,
  path: string,
  kind: 'unary' | 'server_stream',
  bytes: Buffer,
): Promise<{ code: number; details: string; messages: number }> {
  return new Promise((resolve) => {
    let messages = 0;
    const call =
      kind === 'unary'
        ? client.makeUnaryRequest(path, identity, identity, bytes, new grpc.Metadata(), (err) => {
            if (!err) messages += 1;
          })
        : client.makeServerStreamRequest(path, identity, identity, bytes, new grpc.Metadata(), {
            deadline: Date.now() + 2_000,
          });
    if (kind === 'server_stream') {
      (call as grpc.ClientReadableStream<Buffer>).on('data', () => (messages += 1));
      (call as grpc.ClientReadableStream<Buffer>).on('error', () => undefined);
    }
    call.on('status', (s: grpc.StatusObject) =>
      setImmediate(() => resolve({ code: s.code, details: s.details, messages })),
    );
  });
}

function bidiCall(
  client: grpc.Client,
  path: string,
  messages: Buffer[],
): Promise<{ code: number; details: string; messages: number }> {
  return new Promise((resolve) => {
    let received = 0;
    const call = client.makeBidiStreamRequest(path, identity, identity, new grpc.Metadata(), {
      deadline: Date.now() + 2_000,
    });
    call.on('data', () => (received += 1));
    call.on('error', () => undefined);
    call.on('status', (s: grpc.StatusObject) =>
      setImmediate(() => resolve({ code: s.code, details: s.details, messages: received })),
    );
    for (const m of messages) call.write(m);
    call.end();
  });
}
