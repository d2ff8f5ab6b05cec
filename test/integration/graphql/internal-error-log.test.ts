import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { listeningAtrium } from './support.js';
import { type Answer, type Credentials, runOver, TRANSPORTS, type TransportName } from './transports.js';
import { overWsWithRequestId } from './ws-request-id.js';

const POSTS = '{ posts(first: 5) { totalCount } }';

/**
 * A resolver meeting an unexpected error (its table gone: no outage, a bug) answers the masked
 * INTERNAL_SERVER_ERROR on every transport, and both of its log lines name the request: the
 * error-level `graphql operation failed` (with the cause) and the operation's own line, whose
 * `codes` are the codes the client saw (docs/graphql.md, Logs). Until 2026-11-28 the first carried
 * no `reqId` and the second `"codes":[null]`.
 */
describe('an unexpected resolver error is logged with the request id and the code the client saw', () => {
  const log = memoryLog('debug');
  const server = listeningAtrium({}, { logger: log.logger });

  beforeEach(async () => {
    await sql`alter table posts rename to posts_x`.execute(server.atrium.services.store.db);
  });
  afterEach(async () => {
    await sql`alter table posts_x rename to posts`.execute(server.atrium.services.store.db);
  });

  async function run(transport: TransportName, requestId: string): Promise<Answer> {
    if (transport === 'WS')
      return (await overWsWithRequestId(server.base, requestId, { query: POSTS })).answer;
    // runOver sends its "credentials" as HTTP headers on POST, GET and SSE.
    return runOver(transport, server.base, { query: POSTS }, { 'x-request-id': requestId } as Credentials);
  }

  it.each(TRANSPORTS)('%s', async (transport) => {
    const requestId = `internal-${transport.toLowerCase()}`;
    const before = log.lines.length;
    const answer = await run(transport, requestId);
    expect(answer.data).toBeNull();
    expect(answer.errors).toEqual([
      expect.objectContaining({
        message: 'Unexpected error.',
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      }),
    ]);
    const lines = log.lines.slice(before);
    const failed = lines.filter((l) => l.msg === 'graphql operation failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 50, reqId: requestId, err: expect.any(Object) });
    const operation = lines.filter((l) => l.msg === 'graphql operation');
    expect(operation).toHaveLength(1);
    expect(operation[0]).toMatchObject({
      reqId: requestId,
      outcome: 'error',
      codes: ['INTERNAL_SERVER_ERROR'],
    });
    // graphql-ws: the connection's id, and the operation's own id on both lines.
    if (transport === 'WS') expect(failed[0]!.operationId).toBe(operation[0]!.operationId);
  });
});
