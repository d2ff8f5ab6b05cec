import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { memoryLog } from '../../helpers/memory-log.js';
import { rawRequest } from '../../helpers/raw-http.js';
import { forSuite } from '../../helpers/suite.js';
import { startTestAtrium } from '../../helpers/atrium.js';

/**
 * A request Node's HTTP parser refuses is logged as `request refused by the HTTP parser` with its id
 * under `reqId`, as every other HTTP line names it, the id its answer's X-Request-Id carries; one
 * whose headers were parsed before it broke (a body cut short) keeps the client's X-Request-Id
 * (D7). Until 2026-11-28 the line said `requestId` and a fresh id was always made.
 */
describe('requests refused by the HTTP parser: the log line names the request id as reqId', () => {
  const log = memoryLog('info');
  const server = forSuite(
    async () => {
      const atrium = await startTestAtrium({}, undefined, { logger: log.logger });
      return { atrium, base: (await atrium.listen()).httpUrl! };
    },
    (s) => s.atrium.stop(),
  );

  const refusalLines = (before: number) =>
    log.lines.slice(before).filter((l) => l.msg === 'request refused by the HTTP parser');

  it.each([
    [
      'headers over the limit (431)',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: big-1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
    ],
    ['a bad method (400)', 'FR@B /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: bad-method-1\r\n\r\n', 400],
  ])('%s', async (_name, bytes, status) => {
    const before = log.lines.length;
    const res = await rawRequest(server.base, bytes);
    expect(res.status).toBe(status);
    const id = res.headers['x-request-id'];
    expect(id).toMatch(/^req_/);
    const lines = refusalLines(before);
    expect(lines).toEqual([expect.objectContaining({ level: 30, status, reqId: id })]);
    expect(lines[0]).not.toHaveProperty('requestId');
  });

  it('a body cut short after its headers: the client X-Request-Id is kept, on the answer and the line', async () => {
    const before = log.lines.length;
    const { hostname, port } = new URL(server.base);
    const answer = await new Promise<string>((resolve) => {
      const socket = connect({ host: hostname, port: Number(port) });
      const chunks: Buffer[] = [];
      socket.on('data', (d: Buffer) => chunks.push(d));
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
      socket.on('error', () => undefined);
      socket.write(
        'POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          'X-Request-Id: cut-body-1\r\nContent-Length: 100\r\n\r\n{"query":',
      );
      // The client stops sending (half-close) mid-body, 90 bytes short.
      socket.end();
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\nx-request-id: cut-body-1\r\n/i);
    expect(refusalLines(before)).toEqual([expect.objectContaining({ reqId: 'cut-body-1', status: 400 })]);
  });
});
