import { describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { listeningAtrium } from './support.js';
import { overWsWithRequestId } from './ws-request-id.js';

/**
 * A graphql-ws connection has one request id, chosen at the upgrade with HTTP's rules (D7: a
 * well-formed X-Request-Id is kept, anything else replaced by a fresh one), sent back on the 101
 * and carried by every line the connection logs; each operation adds its graphql-ws `id` as
 * `operationId` (docs/graphql.md, Metrics and log lines). Until 2026-11-28 the upgrade's id was
 * ignored, each operation logged a fresh id the client never saw, and a connection_init refused
 * for its credentials logged nothing.
 */
describe('graphql-ws request ids', () => {
  const log = memoryLog('info');
  const server = listeningAtrium({}, { logger: log.logger });
  const QUERY = { query: 'query Hello { __typename }' };

  it.each([
    ['a well-formed id is kept', 'ws-client.id:1' as string | undefined, 'ws-client.id:1'],
    ['a malformed id is replaced', 'not an id!', undefined],
    ['no id gets one', undefined, undefined],
  ])('%s: it is on the 101 and on the operation line', async (_name, sent, kept) => {
    const before = log.lines.length;
    const { answer, upgrade } = await overWsWithRequestId(server.base, sent, QUERY);
    expect(answer.data).toEqual({ __typename: 'Query' });
    const id = upgrade?.['x-request-id'];
    if (kept) expect(id).toBe(kept);
    else expect(id).toMatch(/^req_[0-9a-f]{24}$/);
    const lines = log.lines.slice(before).filter((l) => l.msg === 'graphql operation');
    expect(lines).toEqual([
      expect.objectContaining({
        transport: 'ws',
        reqId: id,
        operationId: expect.any(String),
        operationName: 'Hello',
        outcome: 'ok',
      }),
    ]);
  });

  it('a connection_init refused for its credentials (4403) is one info line with the id and the reason, not the key', async () => {
    const before = log.lines.length;
    const key = 'atr_live_notakeyofanyone0000000000';
    const { closeCode, upgrade } = await overWsWithRequestId(server.base, 'ws-refused-1', QUERY, {
      'x-api-key': key,
    });
    expect(closeCode).toBe(4403);
    expect(upgrade?.['x-request-id']).toBe('ws-refused-1');
    const lines = log.lines.slice(before);
    expect(lines.filter((l) => l.msg === 'WebSocket connection_init refused')).toEqual([
      expect.objectContaining({
        level: 30,
        reqId: 'ws-refused-1',
        closeCode: 4403,
        reason: expect.any(String),
      }),
    ]);
    expect(JSON.stringify(lines)).not.toContain(key);
  });

  it('a credential that is not a string is refused the same way', async () => {
    const before = log.lines.length;
    const { closeCode } = await overWsWithRequestId(server.base, 'ws-refused-2', QUERY, {
      authorization: 42,
    } as never);
    expect(closeCode).toBe(4403);
    expect(log.lines.slice(before).filter((l) => l.msg === 'WebSocket connection_init refused')).toEqual([
      expect.objectContaining({ reqId: 'ws-refused-2', reason: 'authorization is not a string' }),
    ]);
  });
});
