import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSED_BODY_DRAIN_BYTES } from '../../../src/http/refused-body.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

/**
 * A body over BODY_LIMIT_BYTES is refused with 413 before it is read. A proxy (nginx) is still
 * sending it then: when the instance closed the connection under it, nginx met a reset and answered
 * its client 502 instead of the 413. A declared body up to REFUSED_BODY_DRAIN_BYTES over the limit
 * is now read to its end and the connection kept; these tests speak HTTP/1.1 over a raw socket, as
 * nginx does, and send the next request on the same connection to show it is still usable.
 */
const LIMIT = 1024 * 1024;

let atrium: TestAtrium;
let host: string;
let port: number;

beforeAll(async () => {
  atrium = await startTestAtrium({ BODY_LIMIT_BYTES: String(LIMIT) });
  const url = new URL((await atrium.listen()).httpUrl!);
  host = url.hostname;
  port = Number(url.port);
});

afterAll(async () => {
  await atrium?.stop();
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One connection, read as a sequence of answers (each with a Content-Length, as Atrium's are). */
class Connection {
  private readonly socket: Socket;
  private buffer = Buffer.alloc(0);
  private waiting: (() => void) | undefined;
  closed = false;
  /** A write that failed (a reset while the body was still going out). */
  writeError: string | undefined;

  constructor() {
    this.socket = connect({ host, port });
    this.socket.on('data', (d: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.waiting?.();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.waiting?.();
    });
    this.socket.on('error', (err: NodeJS.ErrnoException) => {
      this.writeError = err.code ?? err.message;
    });
  }

  write(bytes: string | Buffer): Promise<void> {
    return new Promise((resolve) => this.socket.write(bytes, () => resolve()));
  }

  /** The next complete answer, or undefined once the server has closed without one. */
  async next(): Promise<Answer | undefined> {
    for (;;) {
      const answer = this.take();
      if (answer) return answer;
      if (this.closed) return undefined;
      await new Promise<void>((resolve) => (this.waiting = resolve));
      this.waiting = undefined;
    }
  }

  /** Resolves true once the server closes the connection, false if it is still open after `ms`. */
  async closesWithin(ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (!this.closed && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return this.closed;
  }

  end(): void {
    this.socket.destroy();
  }

  private take(): Answer | undefined {
    const split = this.buffer.indexOf('\r\n\r\n');
    if (split < 0) return undefined;
    const [statusLine, ...lines] = this.buffer.subarray(0, split).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (this.buffer.length < split + 4 + length) return undefined;
    const body = this.buffer.subarray(split + 4, split + 4 + length).toString('utf8');
    this.buffer = this.buffer.subarray(split + 4 + length);
    return { status: Number(statusLine!.split(' ')[1]), headers, body };
  }
}

const head = (path: string, length: number, type = 'application/json') =>
  `POST ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;

const health = () => `GET /healthz HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`;

describe('a body over BODY_LIMIT_BYTES', { timeout: 30_000 }, () => {
  it.each([
    ['/graphql', 'application/json', 'PAYLOAD_TOO_LARGE'],
    ['/oauth/token', 'application/x-www-form-urlencoded', 'invalid_request'],
  ])(
    '%s: one byte over, sent whole as a proxy sends it, is answered 413 and the connection serves the next request',
    async (path, type, code) => {
      const conn = new Connection();
      try {
        // Head and body in one go, as nginx forwards a buffered request: the 413 comes before the
        // body is through, and the body must still go out without a reset.
        await conn.write(
          Buffer.concat([Buffer.from(head(path, LIMIT + 1, type)), Buffer.alloc(LIMIT + 1, 'a')]),
        );
        const refused = await conn.next();
        expect(refused?.status).toBe(413);
        expect(refused?.headers.connection).not.toBe('close');
        expect(refused?.body).toContain(code);
        await conn.write(health());
        const after = await conn.next();
        expect(after?.status).toBe(200);
        expect(JSON.parse(after!.body)).toEqual({ status: 'ok' });
        expect(conn.writeError).toBeUndefined();
      } finally {
        conn.end();
      }
    },
  );

  it('declared up to the drain allowance over: the 413 comes before the body, which is then read and dropped', async () => {
    const conn = new Connection();
    try {
      const length = LIMIT + REFUSED_BODY_DRAIN_BYTES;
      await conn.write(head('/graphql', length));
      // Refused on the declared length alone, before a byte of the body was sent.
      const refused = await conn.next();
      expect(refused?.status).toBe(413);
      expect(refused?.headers.connection).not.toBe('close');
      await conn.write(Buffer.alloc(length, 'a'));
      await conn.write(health());
      expect((await conn.next())?.status).toBe(200);
      expect(conn.writeError).toBeUndefined();
    } finally {
      conn.end();
    }
  });

  it('declared larger than that: 413 with Connection: close, and the connection closes', async () => {
    const conn = new Connection();
    try {
      await conn.write(head('/graphql', LIMIT + REFUSED_BODY_DRAIN_BYTES + 1));
      const refused = await conn.next();
      expect(refused?.status).toBe(413);
      expect(refused?.headers.connection).toBe('close');
      expect(await conn.closesWithin(5_000)).toBe(true);
    } finally {
      conn.end();
    }
  });

  it('sent chunked (no declared length): 413 with Connection: close, and the connection closes', async () => {
    const conn = new Connection();
    try {
      await conn.write(
        `POST /graphql HTTP/1.1\r\nHost: ${host}:${port}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const chunk = Buffer.alloc(64 * 1024, 'a');
      const framed = Buffer.concat([
        Buffer.from(`${chunk.length.toString(16)}\r\n`),
        chunk,
        Buffer.from('\r\n'),
      ]);
      let refused: Answer | undefined;
      const answered = conn.next().then((a) => (refused = a));
      // Past the limit, then keep going until the answer: the server reads only up to the limit.
      for (let sent = 0; refused === undefined && !conn.closed && sent < 4 * LIMIT; sent += chunk.length) {
        await conn.write(framed);
      }
      await answered;
      expect(refused?.status).toBe(413);
      expect(refused?.headers.connection).toBe('close');
      expect(await conn.closesWithin(5_000)).toBe(true);
    } finally {
      conn.end();
    }
  });
});
