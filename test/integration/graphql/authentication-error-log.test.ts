import type { IncomingHttpHeaders } from 'node:http';
import { createClient } from 'graphql-ws';
import { sql } from 'kysely';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { memoryLog } from '../../helpers/memory-log.js';
import { listeningAtrium } from './support.js';
import { overWsWithRequestId } from './ws-request-id.js';

const QUERY = '{ posts(first: 1) { totalCount } }';

/**
 * Checking credentials that fail for a reason that is neither a refusal nor an outage (here the
 * api_keys table is gone: a bug, not the caller's fault) answers the masked INTERNAL_SERVER_ERROR and
 * logs `graphql authentication failed` with its cause. The line names the request it belongs to, as
 * every other request-scoped line does: the `reqId` the client was sent (X-Request-Id on HTTP, the
 * 101's over graphql-ws) and, for an operation of a graphql-ws connection, its `operationId`. Until
 * 2026-11-29 the line carried neither.
 */
describe('graphql authentication failed names the request', () => {
  const log = memoryLog('info');
  const server = listeningAtrium({}, { logger: log.logger });
  let key: string;

  beforeAll(async () => {
    key = (await server.atrium.caller()).key;
  });
  const breakKeys = () =>
    sql`alter table api_keys rename to api_keys_x`.execute(server.atrium.services.store.db);
  let broken = false;
  beforeEach(() => {
    broken = false;
  });
  afterEach(async () => {
    if (broken) await sql`alter table api_keys_x rename to api_keys`.execute(server.atrium.services.store.db);
  });
  async function brokenKeys() {
    await breakKeys();
    broken = true;
  }

  const failedLines = (from: number) =>
    log.lines.slice(from).filter((l) => l.msg === 'graphql authentication failed');

  async function overHttp(
    kind: 'POST' | 'GET' | 'SSE',
  ): Promise<{ status: number; requestId: string | null; body: string }> {
    const headers = { 'x-api-key': key };
    let res: Response;
    if (kind === 'POST') {
      res = await fetch(`${server.base}/graphql`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ query: QUERY }),
      });
    } else {
      const path = kind === 'GET' ? '/graphql' : '/graphql/stream';
      const accept = kind === 'GET' ? 'application/json' : 'text/event-stream';
      res = await fetch(`${server.base}${path}?query=${encodeURIComponent(QUERY)}`, {
        headers: { ...headers, accept },
      });
    }
    return { status: res.status, requestId: res.headers.get('x-request-id'), body: await res.text() };
  }

  it.each(['POST', 'GET', 'SSE'] as const)('%s: the reqId of the response', async (kind) => {
    await brokenKeys();
    const before = log.lines.length;
    const answer = await overHttp(kind);
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.body)).toMatchObject({
      errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
    });
    expect(answer.requestId).toEqual(expect.any(String));
    const failed = failedLines(before);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 50, reqId: answer.requestId, err: expect.any(Object) });
  });

  it('graphql-ws connection_init: the reqId of the 101, closed with 4500', async () => {
    await brokenKeys();
    const before = log.lines.length;
    const { upgrade, closeCode } = await overWsWithRequestId(
      server.base,
      undefined,
      { query: QUERY },
      {
        'x-api-key': key,
      },
    );
    expect(closeCode).toBe(4500);
    const requestId = upgrade?.['x-request-id'];
    expect(requestId).toEqual(expect.any(String));
    const failed = failedLines(before);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 50, reqId: requestId, err: expect.any(Object) });
  });

  it('graphql-ws operation: the connection reqId and the operation id', async () => {
    let upgrade: IncomingHttpHeaders | undefined;
    class Capturing extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols);
        this.once('upgrade', (res) => (upgrade = res.headers));
      }
    }
    let connected!: () => void;
    const isConnected = new Promise<void>((resolve) => (connected = resolve));
    const client = createClient({
      url: `${server.base.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: Capturing,
      connectionParams: { 'x-api-key': key },
      retryAttempts: 0,
      lazy: false,
      on: { connected: () => connected() },
    });
    try {
      // The connection's credentials hold at connection_init; the check again for the operation fails.
      await isConnected;
      await brokenKeys();
      const before = log.lines.length;
      const errors = await new Promise<unknown>((resolve) => {
        client.subscribe(
          { query: QUERY },
          { next: () => undefined, error: resolve, complete: () => resolve(undefined) },
        );
      });
      expect(errors).toEqual([
        expect.objectContaining({
          message: 'Unexpected error.',
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        }),
      ]);
      const requestId = upgrade?.['x-request-id'];
      expect(requestId).toEqual(expect.any(String));
      const failed = failedLines(before);
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ level: 50, reqId: requestId, operationId: expect.any(String) });
      // The operation's own line (the refusal) carries the same ids.
      const operation = log.lines.slice(before).filter((l) => l.msg === 'graphql operation');
      expect(operation).toHaveLength(1);
      expect(operation[0]).toMatchObject({ reqId: requestId, operationId: failed[0]!.operationId });
    } finally {
      await client.dispose();
    }
  });
});
