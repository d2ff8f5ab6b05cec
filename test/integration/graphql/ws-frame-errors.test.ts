import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';

/**
 * A graphql-ws client that breaks the WebSocket framing: a frame over the size limit (1009) or a
 * text frame that is not UTF-8 (1007). ws closes the connection with the right code, then emits the
 * error, which graphql-ws's own listener wrote to stderr with console.error: a multi-line stack
 * beside the process's pino JSON lines. Such a connection is a client's fault, logged as every
 * other client fault is: one JSON line at info, no stack.
 *
 * A real `atrium serve` child, so "nothing but log lines on stderr" reads the process's real stderr,
 * not a test runner's console.
 */

const LIMIT = 4096;

type Line = Record<string, unknown>;

describe('WebSocket frames ws refuses', () => {
  let database: TestDatabase;
  let served: Served;

  beforeAll(async () => {
    database = await freshDatabase();
    served = await serve(
      { DATABASE_URL: database.url, BODY_LIMIT_BYTES: String(LIMIT), SHUTDOWN_DELAY_MS: '0' },
      { roles: 'api' },
    );
  });
  afterAll(async () => {
    await served?.stop();
    await database?.drop();
  });

  /** Every line of the child's stderr from `from` on, each of which must be one of its JSON log lines. */
  function stderrLines(from: number): Line[] {
    return served
      .stderr()
      .slice(from)
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        try {
          return JSON.parse(line) as Line;
        } catch {
          throw new Error(
            `unstructured output on stderr: ${line}\n--- all of it:\n${served.stderr().slice(from)}`,
          );
        }
      });
  }

  /** An acknowledged graphql-ws connection that then sends `frame`; resolves with the close code. */
  async function sendOnConnection(requestId: string, frame: Buffer | string): Promise<number> {
    const ws = new WebSocket(`${served.url!.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
      headers: { 'x-request-id': requestId },
    });
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      ws.once('error', reject);
      ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
      ws.once('message', (data) => {
        expect(JSON.parse(String(data))).toEqual({ type: 'connection_ack' });
        resolve();
      });
    });
    ws.send(frame, { binary: false });
    return closed;
  }

  it.each([
    [
      'a frame over the size limit',
      'ws-too-large',
      'x'.repeat(LIMIT + 1),
      1009,
      'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
    ],
    [
      'a text frame that is not UTF-8',
      'ws-bad-utf8',
      Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
      1007,
      'WS_ERR_INVALID_UTF8',
    ],
  ])(
    '%s: closed with its code, one JSON line at info, no stack',
    async (_what, requestId, frame, code, wsCode) => {
      const from = served.stderr().length;
      expect(await sendOnConnection(requestId, frame)).toBe(code);
      const ours = () =>
        stderrLines(from).filter((l) => l.msg === 'WebSocket frame refused' && l.reqId === requestId);
      await until(() => ours().length > 0, `the log line for ${requestId}`);
      const lines = ours();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: 30, code: wsCode, closeCode: code, reqId: requestId });
      expect(typeof lines[0]!.reason).toBe('string');
      expect(JSON.stringify(lines[0])).not.toMatch(/stack|\n\s+at /);
      // Everything the process wrote to stderr is one of its JSON lines (stderrLines throws otherwise),
      // and none of them carries a stack.
      expect(stderrLines(from).filter((l) => JSON.stringify(l).includes('"stack"'))).toEqual([]);
    },
  );
});
