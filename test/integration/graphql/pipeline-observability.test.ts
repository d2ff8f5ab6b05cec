import { beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { runOver, TRANSPORTS, type TransportName } from './transports.js';
import { authorWithPost, listeningAtrium } from './support.js';

/**
 * Every GraphQL operation counts in `atrium_graphql_operations_total` and writes one log line, on
 * every transport: POST and GET as much as graphql-ws and graphql-sse, whose operations never pass
 * the HTTP request metrics.
 */

const LABEL: Record<TransportName, string> = { POST: 'post', GET: 'get', WS: 'ws', SSE: 'sse' };

describe('per-operation GraphQL metrics and log lines on every transport', () => {
  const log = memoryLog('debug');
  const server = listeningAtrium({ LOG_LEVEL: 'debug' }, { logger: log.logger });
  let key: string;
  let postId: string;

  async function count(labels: Record<string, string>): Promise<number> {
    const text = await (await fetch(`${server.base}/metrics`)).text();
    const wanted = Object.entries(labels)
      .map(([k, v]) => `${k}="${v}"`)
      .sort();
    for (const line of text.split('\n')) {
      const m = /^atrium_graphql_operations_total\{([^}]*)\} (\d+)$/.exec(line);
      if (m && m[1]!.split(',').sort().join(',') === wanted.join(',')) return Number(m[2]);
    }
    return 0;
  }

  beforeAll(async () => {
    ({ key, postId } = await authorWithPost(server.atrium, 'metricsauthor', 'Metrics'));
  });

  describe.each(TRANSPORTS)('%s', (transport) => {
    const label = LABEL[transport];

    it('counts an executed query as ok and logs it with its name and outcome', async () => {
      const labels = { transport: label, operation_type: 'query', outcome: 'ok' };
      const before = await count(labels);
      const name = `Observed${transport}`;
      const a = await runOver(
        transport,
        server.base,
        { query: `query ${name}($id: ID!) { post(id: $id) { title } }`, variables: { id: postId } },
        { 'x-api-key': key },
      );
      expect(a.data).toEqual({ post: { title: 'Metrics' } });
      expect(await count(labels)).toBe(before + 1);
      const line = log.lines.find((l) => l.msg === 'graphql operation' && l.operationName === name);
      expect(line).toMatchObject({
        transport: label,
        operationType: 'query',
        outcome: 'ok',
        level: transport === 'WS' || transport === 'SSE' ? 30 : 20,
      });
      expect(typeof line!.ms).toBe('number');
      expect(typeof line!.reqId).toBe('string');
    });

    it('counts an operation refused at validation as rejected, with its code in the log line', async () => {
      const labels = { transport: label, operation_type: 'unknown', outcome: 'rejected' };
      const before = await count(labels);
      const name = `TooDeep${transport}`;
      const a = await runOver(transport, server.base, {
        query: `query ${name} { posts { edges { node { author { posts { edges { node { author { id } } } } } } } } }`,
        operationName: name,
      });
      expect(a.data).toBeUndefined();
      expect(await count(labels)).toBe(before + 1);
      const line = log.lines.find((l) => l.msg === 'graphql operation' && l.operationName === name);
      expect(line).toMatchObject({
        transport: label,
        outcome: 'rejected',
        codes: ['GRAPHQL_VALIDATION_FAILED'],
      });
    });

    it('counts a mutation whose resolver fails as an error', async () => {
      const labels = { transport: label, operation_type: 'mutation', outcome: 'error' };
      const before = await count(labels);
      // GET carries no mutation (405); POST, WebSocket and SSE run it: no credentials, UNAUTHENTICATED.
      const a = await runOver(transport, server.base, {
        query: 'mutation { deletePost(id: "pst_none") { deletedPostId } }',
      });
      if (transport === 'GET') {
        expect(a.status).toBe(405);
        expect(await count(labels)).toBe(before);
        return;
      }
      expect(a.data).toBeNull();
      expect(await count(labels)).toBe(before + 1);
    });
  });

  it('counts an SSE request refused for its credentials; a WebSocket refused at connection_init sent no operation', async () => {
    const sse = { transport: 'sse', operation_type: 'unknown', outcome: 'rejected' };
    const ws = { transport: 'ws', operation_type: 'unknown', outcome: 'rejected' };
    const [sseBefore, wsBefore] = [await count(sse), await count(ws)];
    const bad = { 'x-api-key': 'atr_test_not_a_key' };
    expect((await runOver('SSE', server.base, { query: '{ __typename }' }, bad)).status).toBe(401);
    expect((await runOver('WS', server.base, { query: '{ __typename }' }, bad)).closeCode).toBe(4403);
    expect(await count(sse)).toBe(sseBefore + 1);
    expect(await count(ws)).toBe(wsBefore);
  });

  it.each(['WS', 'SSE'] as const)('%s: counts a subscription once it is set up', async (transport) => {
    const labels = { transport: LABEL[transport], operation_type: 'subscription', outcome: 'ok' };
    const before = await count(labels);
    const { createClient } = await import('graphql-sse');
    const { wsClient } = await import('./transports.js');
    const query = 'subscription { commentAdded(postId: "pst_none") { id } }';
    let dispose: () => Promise<void> | void;
    if (transport === 'WS') {
      const client = wsClient(server.base, { 'x-api-key': key });
      client.subscribe(
        { query },
        { next: () => undefined, error: () => undefined, complete: () => undefined },
      );
      dispose = () => client.dispose();
    } else {
      const client = createClient({
        url: `${server.base}/graphql/stream`,
        headers: { 'x-api-key': key },
        retryAttempts: 0,
      });
      client.subscribe(
        { query },
        { next: () => undefined, error: () => undefined, complete: () => undefined },
      );
      dispose = () => client.dispose();
    }
    try {
      await expect.poll(() => count(labels), { timeout: 5_000 }).toBe(before + 1);
    } finally {
      await dispose();
    }
  });

  it('writes one access line per SSE request, with the address like every other request', async () => {
    const reqId = 'sse-access-once';
    const a = await runOver('SSE', server.base, { query: '{ __typename }' }, {
      'x-api-key': key,
      'x-request-id': reqId,
    } as never);
    expect(a.data).toEqual({ __typename: 'Query' });
    // A later request's line: by then the SSE request's lines, however many, are written too.
    await fetch(`${server.base}/healthz`, { headers: { 'x-request-id': 'sse-access-after' } });
    await expect
      .poll(() => log.lines.some((l) => l.msg === 'request' && l.reqId === 'sse-access-after'))
      .toBe(true);
    const lines = log.lines.filter((l) => l.msg === 'request' && l.reqId === reqId);
    expect(lines).toEqual([
      expect.objectContaining({
        route: '/graphql/stream',
        method: 'POST',
        status: 200,
        ip: expect.any(String),
      }),
    ]);
  });

  it('names the metrics in the exposition with their help text', async () => {
    const text = await (await fetch(`${server.base}/metrics`)).text();
    expect(text).toContain('# TYPE atrium_graphql_operations_total counter');
    expect(text).toContain('# TYPE atrium_graphql_operation_duration_seconds histogram');
    expect(text).toMatch(
      /atrium_graphql_operation_duration_seconds_count\{transport="ws",operation_type="query"\} [1-9]/,
    );
  });
});
