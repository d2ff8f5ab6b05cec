import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';
import { healthClient, unary, type Client } from './support.js';

/**
 * SIGTERM to a real `atrium serve --role grpc` behind a balancer (SHUTDOWN_DELAY_MS), with a grpc-js
 * channel connected and idle: it made a call and keeps its connection. Step 2 of docs/deployment.md's
 * drain sends the GOAWAY, the channel answers it by closing its connection, and the step must see it
 * gone, as nginx's idle connections must be seen gone when nginx drops them on the GOAWAY.
 *
 * Before the fix the closed connection was still counted: Node stops reading an idle HTTP/2 session
 * once it has sent a GOAWAY, so the peer's FIN was never read, the session never closed, and the step
 * lasted its whole SHUTDOWN_DELAY_MS ("draining: closing what is left" with grpc 1).
 */

type Line = { msg: string; time: number; grpc?: number };

/**
 * A bare HTTP/2 client that keeps its connection after the GOAWAY and never closes it itself (a
 * grpc-js channel closes it at once). It writes its frames itself.
 */
class RawH2 {
  readonly frames: { type: number; flags: number; stream: number; payload: Buffer }[] = [];
  private buffered = Buffer.alloc(0);
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 9) {
        const length = this.buffered.readUIntBE(0, 3);
        if (this.buffered.length < 9 + length) break;
        const frame = {
          type: this.buffered[3]!,
          flags: this.buffered[4]!,
          stream: this.buffered.readUInt32BE(5) & 0x7fffffff,
          payload: this.buffered.subarray(9, 9 + length),
        };
        this.buffered = this.buffered.subarray(9 + length);
        this.frames.push(frame);
        // SETTINGS: acknowledged, as the protocol asks.
        if (frame.type === 4 && (frame.flags & 1) === 0) socket.write(RawH2.frame(4, 1, 0));
      }
    });
    socket.on('error', () => undefined);
    socket.once('close', () => (this.closed = true));
  }

  static async open(address: string): Promise<RawH2> {
    const at = address.lastIndexOf(':');
    const socket = connect({ port: Number(address.slice(at + 1)), host: address.slice(0, at) });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.once('connect', () => resolve());
    });
    socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), RawH2.frame(4, 0, 0)]));
    return new RawH2(socket);
  }

  static frame(type: number, flags: number, stream: number, payload = Buffer.alloc(0)): Buffer {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(stream, 5);
    return Buffer.concat([head, payload]);
  }

  /** grpc.health.v1.Health/Check for the whole server: HPACK literals, then an empty request. */
  checkHealth(stream: number): void {
    const literal = (name: string, value: string) =>
      Buffer.concat([
        Buffer.from([0, name.length]),
        Buffer.from(name),
        Buffer.from([value.length]),
        Buffer.from(value),
      ]);
    const headers = Buffer.concat([
      literal(':method', 'POST'),
      literal(':scheme', 'http'),
      literal(':path', '/grpc.health.v1.Health/Check'),
      literal(':authority', 'localhost'),
      literal('content-type', 'application/grpc'),
      literal('te', 'trailers'),
    ]);
    this.socket.write(
      Buffer.concat([RawH2.frame(1, 4, stream, headers), RawH2.frame(0, 1, stream, Buffer.alloc(5))]),
    );
  }

  /** The gRPC message answered on `stream`, with its 5-byte prefix. */
  answer(stream: number): Buffer {
    return Buffer.concat(
      this.frames.filter((f) => f.type === 0 && f.stream === stream).map((f) => f.payload),
    );
  }

  goaways(): number {
    return this.frames.filter((f) => f.type === 7).length;
  }
}

describe('gRPC drain behind a balancer with an idle client connection', () => {
  let database: TestDatabase;
  let served: Served | undefined;
  const clients: Client[] = [];

  beforeAll(async () => {
    // A file on SQLite, not the in-memory default: the child process opens the same database.
    database = await sharedDatabase();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    if (served && served.child.exitCode === null && served.child.signalCode === null) await served.kill9();
    served = undefined;
  });
  afterAll(async () => {
    await database?.drop();
  });

  it(
    'stops waiting once the client has closed its connection after the GOAWAY',
    { timeout: 90_000 },
    async () => {
      // Long, so that "ended at once" and "ran its full length" cannot be mistaken for each other.
      const delayMs = 8_000;
      served = await serve(
        { DATABASE_URL: database.url, GRPC_PORT: '0', SHUTDOWN_DELAY_MS: String(delayMs) },
        { roles: 'grpc' },
      );
      const s = served;
      const health = healthClient(s.grpc!);
      clients.push(health);
      const check = await unary<{ status: string }>(health, 'Check', { service: '' });
      expect(check.error).toBeNull();

      const lines = () =>
        s
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Line);
      const find = (msg: string) => lines().find((l) => l.msg.startsWith(msg));
      // 'close', not 'exit': only then has all of the child's stderr been read (after 'exit' a loaded
      // machine can still hold the last lines, the ones read below, in the pipe).
      let exitedAt: number | undefined;
      const exited = new Promise<number | null>((resolve) =>
        s.child.once('close', (code) => {
          exitedAt = Date.now();
          resolve(code);
        }),
      );
      s.child.kill('SIGTERM');
      // Step 1 (serving as usual) lasts delayMs; the channel is still connected when step 2 begins.
      await until(
        () => find('draining: new connections refused') !== undefined,
        'step 2 to begin',
        3 * delayMs,
      );
      expect(find('draining: new connections refused')!.grpc, s.stderr()).toBe(1);
      const stepTwoBegan = Date.now();

      expect(await exited, s.stderr()).toBe(0);
      // The step ended because nothing was open any more, not because its time ran out.
      const closing = find('draining: closing what is left');
      expect(closing, s.stderr()).toBeDefined();
      expect(closing!.grpc, s.stderr()).toBe(0);
      // And so the process was gone well before the step's limit (half of it: a generous margin).
      expect(exitedAt! - stepTwoBegan, s.stderr()).toBeLessThan(delayMs / 2);
      expect(s.stderr()).toContain('"msg":"stopped"');
      expect(s.stderr()).not.toContain('gRPC calls still open');
      expect(s.stderr()).not.toContain('gRPC connections with no call still open');
    },
  );

  it(
    'keeps counting an idle connection whose peer stays, and closes it only at the end of the step',
    { timeout: 90_000 },
    async () => {
      // What the fix must not do: drop a connection because it is idle after the GOAWAY. Its peer may
      // still send on it (nginx keeps a connection that got the GOAWAY in the middle of a call).
      const delayMs = 3_000;
      served = await serve(
        { DATABASE_URL: database.url, GRPC_PORT: '0', SHUTDOWN_DELAY_MS: String(delayMs) },
        { roles: 'grpc' },
      );
      const s = served;
      const raw = await RawH2.open(s.grpc!);
      // When the connection closed, on the machine's clock, to compare with the time of the line that
      // ends step 2. Asking at the close whether that line had arrived raced the child's stderr pipe:
      // on a loaded machine the close could be read first (a CI run failed so, 2026-11-29).
      let closedAt: number | undefined;
      raw.socket.once('close', () => (closedAt ??= Date.now()));
      try {
        // A call, answered SERVING (grpc.health.v1: status 1), and the connection left idle.
        raw.checkHealth(1);
        await until(() => raw.answer(1).length >= 7, 'the answer');
        expect([...raw.answer(1)]).toEqual([0, 0, 0, 0, 2, 8, 1]);

        const exited = new Promise<number | null>((resolve) =>
          s.child.once('close', (code) => resolve(code)),
        );
        s.child.kill('SIGTERM');
        // Step 2's GOAWAY, repeated: the session has been read again and again meanwhile.
        await until(() => raw.goaways() >= 2, 'the GOAWAY, twice', 3 * delayMs);
        expect(await exited, s.stderr()).toBe(0);
        const closing = s
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Line)
          .find((l) => l.msg === 'draining: closing what is left');
        expect(closing?.grpc, s.stderr()).toBe(1);
        await until(() => raw.closed, 'the connection closed by the drain');
        // Closed by the end of the step, not before it (early, it would be SHUTDOWN_DELAY_MS before).
        expect(closedAt!, s.stderr()).toBeGreaterThanOrEqual(closing!.time);
        expect(s.stderr()).not.toContain('gRPC calls still open');
      } finally {
        raw.socket.destroy();
      }
    },
  );
});
