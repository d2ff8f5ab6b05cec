import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { until } from '../../helpers/wait.js';
import {
  grpc,
  handledMetrics,
  holdCallsOf,
  metadataFor,
  startGrpcAtrium,
  unary,
  type GrpcAtrium,
} from './support.js';

const identity = (b: Buffer): Buffer => b;

interface Ended {
  code: number;
  details: string;
  trailers: grpc.Metadata;
}

/**
 * A call to a method no service has (docs/grpc.md, Observability): UNIMPLEMENTED as grpc-js words
 * it, with the `x-request-id`, one access line and the metrics under `unknown` labels. Until
 * 2026-11-28 grpc-js answered it before any Atrium code ran: no request id, no line, no count.
 */
describe('gRPC calls to an unknown method', () => {
  const log = memoryLog('info');
  let atrium: GrpcAtrium;
  let raw: grpc.Client;

  beforeAll(async () => {
    atrium = await startGrpcAtrium({}, { logger: log.logger });
    raw = new grpc.Client(atrium.address, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    raw?.close();
    await atrium?.stop();
  });

  const ended = (call: { on(event: 'status', fn: (s: grpc.StatusObject) => void): unknown }) =>
    new Promise<Ended>((resolve) =>
      call.on('status', (s) =>
        setImmediate(() => resolve({ code: s.code, details: s.details, trailers: s.metadata })),
      ),
    );

  it('unary: UNIMPLEMENTED with the client x-request-id, one access line and the metrics', async () => {
    const before = log.lines.length;
    const path = '/users.v1.UserService/Nope';
    const call = raw.makeUnaryRequest(
      path,
      identity,
      identity,
      Buffer.alloc(0),
      metadataFor({ 'x-request-id': 'unknown-1' }),
      () => undefined,
    );
    const result = await ended(call);
    expect(result.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(result.details).toBe(`The server does not implement the method ${path}`);
    expect(result.trailers.get('x-request-id')).toEqual(['unknown-1']);
    const lines = log.lines.slice(before);
    expect(lines.filter((l) => l.msg === 'grpc call')).toEqual([
      expect.objectContaining({ rpc: path, code: 'UNIMPLEMENTED', request_id: 'unknown-1' }),
    ]);
    const metrics = await handledMetrics(atrium, 'unknown', 'UNIMPLEMENTED');
    expect(metrics).toMatch(
      /atrium_grpc_server_handled_total\{grpc_service="unknown",grpc_method="unknown",grpc_type="unknown",grpc_code="UNIMPLEMENTED"\} 1/,
    );
    expect(metrics).toMatch(
      /atrium_grpc_server_started_total\{grpc_service="unknown",grpc_method="unknown",grpc_type="unknown"\} 1/,
    );
    expect(metrics).not.toContain('Nope');
  });

  it('a stream that never half-closes is answered at once, with a fresh request id', async () => {
    const before = log.lines.length;
    const call = raw.makeBidiStreamRequest('/nowhere.v1.Gone/Stream', identity, identity, metadataFor({}));
    call.on('error', () => undefined);
    call.write(Buffer.from([1, 2, 3]));
    const result = await ended(call);
    expect(result.code).toBe(grpc.status.UNIMPLEMENTED);
    const id = result.trailers.get('x-request-id')[0];
    expect(id).toMatch(/^req_[0-9a-f]{24}$/);
    expect(log.lines.slice(before).filter((l) => l.msg === 'grpc call')).toEqual([
      expect.objectContaining({ rpc: '/nowhere.v1.Gone/Stream', code: 'UNIMPLEMENTED', request_id: id }),
    ]);
  });
});

/**
 * docs/grpc.md, Drain: new calls are refused with UNAVAILABLE. An unknown method is no exception: once
 * the drain closes the server, the listener is closed and every connection has had its GOAWAY, so a
 * new call, whatever its path, is refused before any handler (ours or grpc-js's UNIMPLEMENTED) runs.
 * Checked because unknown methods get a handler of their own (server.ts), which does not ask whether
 * the server drains.
 */
describe('gRPC calls to an unknown method during a drain', () => {
  it('are refused with UNAVAILABLE, as known ones are, while a call in flight holds the drain', async () => {
    const atrium = await startGrpcAtrium();
    const raw = new grpc.Client(atrium.address, grpc.credentials.createInsecure());
    try {
      const member = await atrium.caller();
      const slow = await atrium.caller();
      const hold = holdCallsOf(atrium, slow.userId);
      const client = atrium.client();
      // The channel is connected before the drain, as a client's usually is.
      const before = await unaryStatus(raw, '/users.v1.UserService/Nope');
      expect(before.code).toBe(grpc.status.UNIMPLEMENTED);
      const inFlight = unary(client, 'GetUser', { user_id: slow.userId }, slow.headers);
      await until(() => hold.held, 'the call in flight');

      const closing = atrium.close();
      for (const path of ['/users.v1.UserService/Nope', '/nowhere.v1.Gone/Call']) {
        expect((await unaryStatus(raw, path)).code, path).toBe(grpc.status.UNAVAILABLE);
      }
      const known = await unary(client, 'GetUser', { user_id: member.userId }, member.headers);
      expect(known.error?.code).toBe(grpc.status.UNAVAILABLE);

      hold.release();
      expect((await inFlight).error).toBeNull();
      await closing;
    } finally {
      raw.close();
      await atrium.stop();
    }
  });
});

function unaryStatus(client: grpc.Client, path: string): Promise<grpc.StatusObject> {
  return new Promise((resolve) => {
    const call = client.makeUnaryRequest(path, identity, identity, Buffer.alloc(0), () => undefined);
    call.on('status', resolve);
  });
}
