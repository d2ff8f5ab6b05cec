import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { root } from '../helpers/cli.js';
import { freshDatabase, testDialect, type TestDatabase } from '../helpers/database.js';

/**
 * docs/deployment.md: the same signal a second time ends a drain at once with 1; the other one does
 * not. A signal that arrives once `serve` has built its surfaces, while the start is still settling
 * (binding, the first readiness probe), is recorded and the start closes what it made once its step
 * is done. A second signal then was dropped without a word: Ctrl-C twice did nothing until the start
 * had settled and handed over to the drain.
 *
 * The built CLI, `--role grpc`, with a Redis that does not answer the first readiness probe's PING
 * (the gRPC listener asks it once before it reports started): that PING is the moment the start is
 * settling, and it stays there until the probe's 2 s timeout.
 */

interface FakeRedis {
  port: number;
  close(): void;
}

/** Enough of Redis for a start; the first connection's PING (the readiness probe) is never answered. */
function fakeRedis(onProbe: () => void): Promise<FakeRedis> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    const id = ++connections;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    let subscriptions = 0;
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (let command = readCommand(pending); command; command = readCommand(pending)) {
        pending = pending.subarray(command.length);
        const [name = '', ...args] = command.args;
        switch (name.toUpperCase()) {
          case 'PING':
            if (id === 1) onProbe();
            else socket.write('+PONG\r\n');
            break;
          case 'INFO': {
            const info = '# Server\r\nredis_version:7.0.0\r\nloading:0\r\n';
            socket.write(`$${info.length}\r\n${info}\r\n`);
            break;
          }
          case 'SUBSCRIBE':
            for (const channel of args) {
              subscriptions += 1;
              socket.write(
                `*3\r\n$9\r\nsubscribe\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n:${subscriptions}\r\n`,
              );
            }
            break;
          case 'GET':
            socket.write('$-1\r\n');
            break;
          default:
            socket.write('+OK\r\n');
        }
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    ),
  );
}

/** One RESP command (an array of bulk strings) at the start of `buffer`, if it is all there. */
function readCommand(buffer: Buffer): { args: string[]; length: number } | undefined {
  let end = buffer.indexOf('\r\n');
  if (buffer[0] !== 0x2a || end < 0) return undefined;
  const count = Number(buffer.subarray(1, end).toString());
  let at = end + 2;
  const args: string[] = [];
  for (let i = 0; i < count; i++) {
    end = buffer.indexOf('\r\n', at);
    if (end < 0) return undefined;
    const size = Number(buffer.subarray(at + 1, end).toString());
    if (buffer.length < end + 2 + size + 2) return undefined;
    args.push(buffer.subarray(end + 2, end + 2 + size).toString());
    at = end + 2 + size + 2;
  }
  return { args, length: at };
}

interface Line {
  msg: string;
  signal?: string;
}

describe('a second stop signal while the start is settling', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let dir: string | undefined;
  beforeAll(async () => {
    ensureBuilt();
    if (testDialect() === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-second-signal-'));
      database = { url: `sqlite:${join(dir, 'atrium.db')}`, dialect: 'sqlite', drop: async () => undefined };
    } else database = await freshDatabase();
    // ensureBuilt may have to compile dist/, which takes over a minute on a busy machine.
  }, 240_000);
  afterAll(async () => {
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Sends `first` at the readiness probe, then `second` once the first is logged. */
  async function signalTwice(first: NodeJS.Signals, second: NodeJS.Signals) {
    let stderr = '';
    let probed = false;
    let sendFirst = () => undefined as void;
    const redis = await fakeRedis(() => {
      if (probed) return;
      probed = true;
      sendFirst();
    });
    try {
      const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve', '--role', 'grpc'], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          HOST: '127.0.0.1',
          PORT: '0',
          GRPC_PORT: '0',
          LOG_LEVEL: 'info',
          DATABASE_URL: database.url,
          REDIS_URL: `redis://127.0.0.1:${redis.port}`,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      // Never left running, whatever happens.
      const kill = setTimeout(() => child.kill('SIGKILL'), 90_000);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      let sentSecond = false;
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (!sentSecond && stderr.includes('"msg":"signal while starting; stopped before serving"')) {
          sentSecond = true;
          child.kill(second);
        }
      });
      sendFirst = () => void child.kill(first);
      const code = await exited;
      clearTimeout(kill);
      const lines = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
      return { code, lines, stderr, probed };
    } finally {
      redis.close();
    }
  }

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} twice exits 1 at once, as during a drain`, async () => {
      const run = await signalTwice(signal, signal);
      expect(run.probed, run.stderr).toBe(true);
      expect(run.code, run.stderr).toBe(1);
      expect(run.lines.map((l) => l.msg)).not.toContain('atrium started');
      expect(run.lines.filter((l) => l.signal === signal).map((l) => l.msg)).toEqual([
        'signal while starting; stopped before serving',
        'second signal while starting; exiting now',
      ]);
    });
  }

  it('SIGTERM then SIGINT: the other signal is logged and the start still stops cleanly, 0', async () => {
    const run = await signalTwice('SIGTERM', 'SIGINT');
    expect(run.probed, run.stderr).toBe(true);
    expect(run.code, run.stderr).toBe(0);
    expect(run.lines.map((l) => l.msg)).not.toContain('atrium started');
    expect(run.lines.find((l) => l.signal === 'SIGINT')?.msg).toBe('already stopping');
    expect(run.lines.map((l) => l.msg)).toContain('stopped');
  });
});
