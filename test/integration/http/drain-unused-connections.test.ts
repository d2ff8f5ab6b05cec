import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';

/**
 * SIGTERM to a real `atrium serve --role api` while HTTP connections that carry no request are open:
 * one that never sent a byte (a port scanner, a TCP health check, a browser's preconnect) and one
 * trickling its headers. README: "SIGTERM drains: stop accepting, finish in-flight requests and
 * streams, exit 0".
 *
 * Before the fix Fastify closed only kept-alive connections that had finished a request: these held
 * the drain until its 30 s limit, and the process exited 1 ("drain took too long; exiting").
 */

interface RawClient {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
}

function rawClient(url: string): Promise<RawClient> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.removeListener('error', reject);
      socket.on('error', () => undefined);
      resolve({ socket, received: () => received, closed });
    });
  });
}

describe('SIGTERM with HTTP connections that carry no request', () => {
  let database: TestDatabase;
  let key: string;
  let served: Served | undefined;
  const clients: RawClient[] = [];
  const timers: NodeJS.Timeout[] = [];

  beforeAll(async () => {
    // A file on SQLite, not the in-memory default: the child process opens the same database.
    database = await sharedDatabase();
    const services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }), {
      migrate: true,
    });
    try {
      const user = await services.core.users.create({ handle: 'drainer', email: 'drainer@example.com' });
      key = (await services.apiKeys.create({ userId: user.id, tier: 'enterprise' })).key;
    } finally {
      await closeServices(services);
    }
  });
  afterEach(async () => {
    for (const t of timers.splice(0)) clearInterval(t);
    for (const c of clients.splice(0)) c.socket.destroy();
    if (served && served.child.exitCode === null && served.child.signalCode === null) await served.kill9();
    served = undefined;
  });
  afterAll(async () => {
    await database?.drop();
  });

  async function open(url: string): Promise<RawClient> {
    const client = await rawClient(url);
    clients.push(client);
    return client;
  }

  /** Writes `line` every 200 ms until the socket closes. */
  function trickle(client: RawClient, line: string): void {
    const timer = setInterval(() => {
      if (client.socket.writable) client.socket.write(line);
    }, 200);
    timers.push(timer);
    void client.closed.then(() => clearInterval(timer));
  }

  function exitCode(s: Served): Promise<number | null> {
    if (s.child.exitCode !== null) return Promise.resolve(s.child.exitCode);
    return new Promise((resolve) => s.child.once('exit', (code) => resolve(code)));
  }

  it(
    'closes a silent connection and one trickling its headers at once, and exits 0',
    { timeout: 60_000 },
    async () => {
      served = await serve({ DATABASE_URL: database.url, SHUTDOWN_DELAY_MS: '0' }, { roles: 'api' });
      const s = served;
      const silent = await open(s.url!);
      const slowHeaders = await open(s.url!);
      slowHeaders.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      trickle(slowHeaders, 'X-A: b\r\n');
      // A kept-alive connection that finished a request: already closed at once before the fix.
      const idle = await open(s.url!);
      idle.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await until(() => idle.received().includes('\r\n\r\n'), 'the kept-alive answer');

      const exited = exitCode(s);
      s.child.kill('SIGTERM');
      await Promise.all([silent.closed, slowHeaders.closed, idle.closed]);
      expect(await exited, s.stderr()).toBe(0);
      expect(s.stderr()).toContain('"msg":"stopped"');
      expect(s.stderr()).not.toContain('drain took too long');
      // Nothing was answered on the connections that never completed a request.
      expect(silent.received()).toBe('');
      expect(slowHeaders.received()).toBe('');
    },
  );

  it(
    'lets requests whose body is still arriving end (answered, or 408 at REQUEST_TIMEOUT_MS), then exits 0',
    { timeout: 60_000 },
    async () => {
      served = await serve(
        { DATABASE_URL: database.url, SHUTDOWN_DELAY_MS: '0', REQUEST_TIMEOUT_MS: '6000' },
        { roles: 'api' },
      );
      const s = served;
      const head = (length: number) =>
        `POST /api/v2/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `X-API-Key: ${key}\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
      // Its body is finished after the signal: the handler runs and answers (400: no items).
      const finishing = await open(s.url!);
      finishing.socket.write(`${head(2)}{`);
      // Its body never ends: the request deadline answers 408.
      const stalled = await open(s.url!);
      stalled.socket.write(`${head(1000)}{`);
      trickle(stalled, ' ');
      const silent = await open(s.url!);
      // Node sends 100 Continue as it hands the request to the application: both are in flight.
      await until(
        () => [finishing, stalled].every((c) => c.received().startsWith('HTTP/1.1 100 Continue\r\n\r\n')),
        'both requests to be read',
      );

      const exited = exitCode(s);
      s.child.kill('SIGTERM');
      await until(() => s.stderr().includes('"msg":"draining"'), 'the drain to start');
      await silent.closed;
      finishing.socket.write('}');
      await Promise.all([finishing.closed, stalled.closed]);
      const answer = (c: RawClient) => c.received().slice('HTTP/1.1 100 Continue\r\n\r\n'.length);
      expect(answer(finishing)).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer(finishing).toLowerCase()).toContain('connection: close');
      expect(answer(stalled)).toMatch(/^HTTP\/1\.1 408 /);
      expect(await exited, s.stderr()).toBe(0);
      expect(s.stderr()).toContain('"msg":"stopped"');
      expect(s.stderr()).not.toContain('drain took too long');
    },
  );

  it(
    'behind a balancer (SHUTDOWN_DELAY_MS), waits for the kept-alive connection only, not a silent one',
    { timeout: 60_000 },
    async () => {
      // docs/deployment.md, step 2: wait, up to SHUTDOWN_DELAY_MS, for the balancer to close its
      // connections. A silent one is no balancer's and never ends: before the fix it was counted as
      // open, and the step always lasted its full length.
      const delayMs = 5_000;
      served = await serve(
        { DATABASE_URL: database.url, SHUTDOWN_DELAY_MS: String(delayMs) },
        { roles: 'api' },
      );
      const s = served;
      const silent = await open(s.url!);
      const keptAlive = await open(s.url!);
      keptAlive.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await until(() => keptAlive.received().includes('\r\n\r\n'), 'the kept-alive answer');

      const exited = exitCode(s);
      s.child.kill('SIGTERM');
      const lines = () =>
        s
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg: string; time: number; http?: number });
      const waiting = () => lines().find((l) => l.msg.startsWith('draining: new connections refused'));
      // Step 1 (serving as usual) lasts delayMs: the silent connection is long past its first second.
      await until(() => waiting() !== undefined, 'step 2 to begin', 3 * delayMs);
      // Only the kept-alive connection is waited for; the server leaves it open for the balancer.
      expect(waiting()!.http).toBe(1);
      expect(keptAlive.socket.destroyed).toBe(false);
      // The balancer closes its idle connection (nginx: keepalive_timeout); step 2 then ends.
      keptAlive.socket.end();
      await silent.closed;
      expect(await exited, s.stderr()).toBe(0);
      const closing = lines().find((l) => l.msg === 'draining: closing what is left')!;
      // It ended when the kept-alive connection did, not at its limit.
      expect(closing.time - waiting()!.time).toBeLessThan(delayMs);
      expect(closing.http).toBe(0);
      expect(silent.received()).toBe('');
      expect(s.stderr()).toContain('"msg":"stopped"');
    },
  );
});
