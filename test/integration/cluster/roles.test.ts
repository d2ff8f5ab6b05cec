import http from 'node:http';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../../src/cluster/cluster.js';
import { DEFAULT_LAYOUT, portsNeeded } from '../../../src/cluster/layout.js';
import { ConfigError } from '../../../src/config/schema.js';
import { claimSqlite } from '../../../src/process/sqlite-guard.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { freePorts } from './support.js';

describe('roles: each process starts only its part and reports its own dependencies', () => {
  const started: TestAtrium[] = [];
  const start = async (roles: ('api' | 'auth' | 'grpc' | 'worker')[]) => {
    const atrium = await startTestAtrium({ REDIS_URL: TEST_REDIS_URL }, roles);
    started.push(atrium);
    return atrium;
  };
  afterAll(async () => {
    await Promise.all(started.map((a) => a.stop()));
  });

  it('api: REST routes, no token server; ready needs the database and Redis', async () => {
    const api = await start(['api']);
    expect((await api.http!.inject({ url: '/api/v2/orders' })).statusCode).toBe(401);
    expect((await api.http!.inject({ method: 'POST', url: '/oauth/token' })).statusCode).toBe(404);
    const ready = await api.http!.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json().checks).toEqual({ database: 'ok', redis: 'ok' });
  });

  it('auth: the token server, no REST; ready needs the database and Redis (brute-force limits)', async () => {
    const auth = await start(['auth']);
    expect((await auth.http!.inject({ url: '/api/v2/orders' })).statusCode).toBe(404);
    expect((await auth.http!.inject({ url: '/.well-known/oauth-authorization-server' })).statusCode).toBe(
      200,
    );
    expect((await auth.http!.inject({ url: '/readyz' })).json().checks).toEqual({
      database: 'ok',
      redis: 'ok',
    });
  });

  it('worker: only health and metrics over HTTP; ready needs the database alone', async () => {
    const worker = await start(['worker']);
    expect((await worker.http!.inject({ url: '/api/v2/orders' })).statusCode).toBe(404);
    expect((await worker.http!.inject({ url: '/.well-known/jwks.json' })).statusCode).toBe(404);
    expect((await worker.http!.inject({ url: '/healthz' })).statusCode).toBe(200);
    const ready = await worker.http!.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json().checks).toEqual({ database: 'ok' });
    expect((await worker.http!.inject({ url: '/metrics' })).body).toMatch(/atrium_redis_up 1/);
  });

  it('drains behind a balancer: serves (ready 503, kept alive), then refuses new connections and closes each after its answer', async () => {
    const api = await startTestAtrium(
      { REDIS_URL: TEST_REDIS_URL, HOST: '127.0.0.1', SHUTDOWN_DELAY_MS: '1500' },
      ['api'],
    );
    started.push(api);
    const { httpUrl } = await api.listen();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string) =>
      new Promise<{ status?: number; connection?: string; port?: number }>((resolve, reject) => {
        http
          .get(`${httpUrl}${path}`, { agent }, (res) => {
            const port = res.socket.localPort;
            res.resume();
            res.on('end', () =>
              resolve({ status: res.statusCode, connection: res.headers.connection, port }),
            );
          })
          .on('error', reject);
      });
    try {
      const first = await get('/healthz');
      const closing = api.close();
      // Step 1: still serving, on the same kept-alive connection, but not ready.
      expect(await get('/readyz')).toEqual({ status: 503, connection: 'keep-alive', port: first.port });
      await new Promise((r) => setTimeout(r, 1700));
      // Step 2: a new connection is refused (nginx sends it elsewhere); the open one is still served,
      // and told to close.
      await expect(fetch(`${httpUrl}/healthz`)).rejects.toThrow();
      expect(await get('/healthz')).toEqual({ status: 200, connection: 'close', port: first.port });
      await closing;
    } finally {
      agent.destroy();
    }
  });
});

describe('SQLite is served by one process', () => {
  let dir: string;
  let url: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-sqlite-guard-'));
    url = `sqlite:${join(dir, 'atrium.db')}`;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('leaves in-memory databases alone: nothing there can be shared', () => {
    expect(claimSqlite('sqlite::memory:')).toBeUndefined();
    expect(claimSqlite('postgres://postgres@127.0.0.1/x')).toBeUndefined();
  });

  it('the cluster refuses SQLite before starting anything', async () => {
    await expect(
      Cluster.start({
        databaseUrl: url,
        redisUrl: TEST_REDIS_URL,
        layout: DEFAULT_LAYOUT,
        httpPort: 1,
        grpcPort: 2,
      }),
    ).rejects.toThrow(/DATABASE_URL: postgres:\/\/\.\.\. for a cluster/);
  });
});

describe('the cluster checks its ports before starting anything', () => {
  it('names the setting of a taken port: nginx HTTP, then a process port', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    // Nothing listens on port 1: had the check not stopped the start, it would fail on the database.
    const start = (httpPort: number, ports: number[]) =>
      Cluster.start({
        databaseUrl: 'postgres://postgres@127.0.0.1:1/atrium_never',
        redisUrl: TEST_REDIS_URL,
        layout: DEFAULT_LAYOUT,
        httpPort,
        grpcPort: 0,
        ports,
      }).then(
        () => undefined,
        (err: unknown) => err,
      );
    try {
      const ports = await freePorts(portsNeeded(DEFAULT_LAYOUT));
      const nginx = await start(port, ports);
      expect(nginx).toBeInstanceOf(ConfigError);
      expect(nginx).toMatchObject({ variable: 'CLUSTER_HTTP_PORT', got: String(port) });
      expect((nginx as Error).message).toContain(`127.0.0.1:${port}: EADDRINUSE`);
      // The second api process's port is the taken one.
      const api2 = await start(0, ports.with(1, port));
      expect(api2).toMatchObject({ variable: 'CLUSTER_BASE_PORT', got: String(port) });
      expect((api2 as Error).message).toContain('api-2 can listen');
    } finally {
      taken.close();
    }
  });
});
