import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium } from '../../helpers/atrium.js';
import { grpc, startGrpcAtrium, unary, userServiceClient, type GrpcAtrium } from './support.js';

const { status } = grpc;

describe('gRPC per-call log line, metrics and message size limit', () => {
  let atrium: GrpcAtrium;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n'))
          if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    atrium = await startGrpcAtrium({}, { logger: pino({ level: 'info' }, sink) });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('writes one log line per call with the rpc, status code, duration and request id, never the key', async () => {
    const caller = await atrium.caller();
    lines.length = 0;
    const ok = await unary(
      atrium.client(),
      'GetUser',
      { user_id: caller.userId },
      {
        ...caller.headers,
        'x-request-id': 'obs-1',
      },
    );
    expect(ok.error).toBeNull();
    const missing = await unary(
      atrium.client(),
      'GetUser',
      { user_id: 'usr_00000000000000000000000000' },
      {
        ...caller.headers,
        'x-request-id': 'obs-2',
      },
    );
    expect(missing.error?.code).toBe(status.NOT_FOUND);
    const calls = lines.filter((l) => l.msg === 'grpc call');
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ rpc: '/users.v1.UserService/GetUser', code: 'OK', request_id: 'obs-1' });
    expect(calls[1]).toMatchObject({
      rpc: '/users.v1.UserService/GetUser',
      code: 'NOT_FOUND',
      request_id: 'obs-2',
    });
    expect(typeof calls[0]!.ms).toBe('number');
    expect(JSON.stringify(lines)).not.toContain(caller.key);
  });

  it('counts calls by method and code in the registry GET /metrics serves', async () => {
    const res = await fetch(`${atrium.httpUrl}/metrics`);
    const text = await res.text();
    expect(text).toMatch(
      /atrium_grpc_server_handled_total\{grpc_service="users.v1.UserService",grpc_method="GetUser",grpc_type="unary",grpc_code="NOT_FOUND"\} 1/,
    );
    expect(text).toMatch(/atrium_grpc_server_handling_seconds_count\{[^}]*grpc_method="GetUser"[^}]*\} 2/);
    expect(text).toContain('atrium_http_requests_total');
  });

  it('refuses a request message over BODY_LIMIT_BYTES with RESOURCE_EXHAUSTED', async () => {
    const caller = await atrium.caller();
    const big = await unary(
      atrium.client(),
      'GetUser',
      { user_id: 'x'.repeat(1024 * 1024 + 1) },
      caller.headers,
    );
    expect(big.error?.code).toBe(status.RESOURCE_EXHAUSTED);
  });
});

describe('a gRPC-only process (serve --role grpc)', () => {
  it('answers /metrics, /healthz and /readyz on PORT with its gRPC metrics, and no REST routes', async () => {
    const atrium = await startTestAtrium({ HOST: '127.0.0.1', GRPC_PORT: '0' }, ['grpc']);
    try {
      const { httpUrl, grpcAddress } = await atrium.listen();
      expect(httpUrl).toBeDefined();
      const caller = await atrium.caller();
      const grpcClient = userServiceClient(grpcAddress!);
      const ok = await unary(grpcClient, 'GetUser', { user_id: caller.userId }, caller.headers);
      grpcClient.close();
      expect(ok.error).toBeNull();
      const metrics = await fetch(`${httpUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(
        /atrium_grpc_server_handled_total\{grpc_service="users.v1.UserService",grpc_method="GetUser",grpc_type="unary",grpc_code="OK"\} 1/,
      );
      expect((await fetch(`${httpUrl}/healthz`)).status).toBe(200);
      expect((await fetch(`${httpUrl}/readyz`)).status).toBe(200);
      expect((await fetch(`${httpUrl}/api/v2/orders`, { headers: caller.headers })).status).toBe(404);
    } finally {
      await atrium.stop();
    }
  });
});
