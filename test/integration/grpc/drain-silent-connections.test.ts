import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';
import { healthClient, unary } from './support.js';

/**
 * SIGTERM to a real `atrium serve --role grpc` while TCP connections to GRPC_PORT carry no call:
 * one that never sent a byte (a port scanner, a TCP health check) and one that stopped in the middle
 * of the HTTP/2 preface. docs/grpc.md: "Whatever is still open after 10 s is cancelled; the process
 * exits 0".
 *
 * Before the fix they held the drain: at 10 s the log said gRPC calls were still open (there were
 * none) and cancelled them, and the sockets, only half closed, kept the process alive until the 30 s
 * limit ("drain ended but something still holds the process open; exiting").
 */

function open(address: string): Promise<Socket> {
  const at = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    // allowHalfOpen: a peer that never ends its side (gone without a reset, or a client that does not
    // read its socket), as the outside walker's was. Flowing, so the server's end is seen ('end').
    const socket = connect({
      port: Number(address.slice(at + 1)),
      host: address.slice(0, at),
      allowHalfOpen: true,
    });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.removeListener('error', reject);
      socket.on('error', () => undefined);
      socket.resume();
      resolve(socket);
    });
  });
}

describe('gRPC drain with connections that carry no call', () => {
  let database: TestDatabase;
  let served: Served | undefined;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    // A file on SQLite, not the in-memory default: the child process opens the same database.
    database = await sharedDatabase();
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    if (served && served.child.exitCode === null && served.child.signalCode === null) await served.kill9();
    served = undefined;
  });
  afterAll(async () => {
    await database?.drop();
  });

  it(
    'closes them at once, warns of no call, and exits 0 though their peers never end their side',
    { timeout: 60_000 },
    async () => {
      served = await serve({ DATABASE_URL: database.url, GRPC_PORT: '0' }, { roles: 'grpc' });
      const s = served;
      const silent = await open(s.grpc!);
      const halfPreface = await open(s.grpc!);
      sockets.push(silent, halfPreface);
      halfPreface.write('PRI * HTTP/2.0\r\n');
      const ended = [silent, halfPreface].map((socket) => new Promise((r) => socket.once('end', r)));
      // A real client that made a call and stays connected, idle: it ends on the GOAWAY, as before.
      const health = healthClient(s.grpc!);
      const check = await unary<{ status: string }>(health, 'Check', { service: '' });
      expect(check.error).toBeNull();

      const exited = new Promise<number | null>((resolve) => s.child.once('exit', (code) => resolve(code)));
      s.child.kill('SIGTERM');
      expect(await exited, s.stderr()).toBe(0);
      await Promise.all(ended);
      health.close();
      expect(s.stderr()).toContain('"msg":"stopped"');
      expect(s.stderr()).not.toContain('gRPC calls still open');
      expect(s.stderr()).not.toContain('something still holds the process open');
      expect(s.stderr()).not.toContain('drain took too long');
    },
  );

  it(
    'behind a balancer (SHUTDOWN_DELAY_MS), does not wait for a silent connection to close',
    { timeout: 60_000 },
    async () => {
      // docs/deployment.md, step 2: wait, up to SHUTDOWN_DELAY_MS, for the balancer to close its
      // connections. One that never sent the preface never answers the GOAWAY: before the fix it was
      // counted as open, and the step always lasted its full length.
      const delayMs = 5_000;
      served = await serve(
        { DATABASE_URL: database.url, GRPC_PORT: '0', SHUTDOWN_DELAY_MS: String(delayMs) },
        { roles: 'grpc' },
      );
      const s = served;
      const silent = await open(s.grpc!);
      sockets.push(silent);
      const ended = new Promise((r) => silent.once('end', r));

      const exited = new Promise<number | null>((resolve) => s.child.once('exit', (code) => resolve(code)));
      s.child.kill('SIGTERM');
      const lines = () =>
        s
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg: string; time: number; grpc?: number });
      const waiting = () => lines().find((l) => l.msg.startsWith('draining: new connections refused'));
      // Step 1 (serving as usual) lasts delayMs: the silent connection is long past its first second.
      await until(() => waiting() !== undefined, 'step 2 to begin', 3 * delayMs);
      // Nothing to wait for: as with no connection at all.
      expect(waiting()!.grpc, s.stderr()).toBe(0);
      expect(await exited, s.stderr()).toBe(0);
      // Closed by the drain's last step, which came at once, not at the step's limit.
      await ended;
      const closing = lines().find((l) => l.msg === 'draining: closing what is left')!;
      expect(closing.time - waiting()!.time, s.stderr()).toBeLessThan(delayMs);
      expect(s.stderr()).toContain('"msg":"stopped"');
      expect(s.stderr()).not.toContain('gRPC calls still open');
    },
  );
});
