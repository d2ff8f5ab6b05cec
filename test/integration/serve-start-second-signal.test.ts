import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { root } from '../helpers/cli.js';
import { freshDatabase, testDialect, type TestDatabase } from '../helpers/database.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * docs/deployment.md: the same signal a second time ends a drain at once with 1; the other one does
 * not. A signal that arrives once `serve` has built its surfaces, while the start is still settling
 * (binding, the first readiness probe), is recorded and the start closes what it made once its step
 * is done. A second signal then was dropped without a word: Ctrl-C twice did nothing until the start
 * had settled and handed over to the drain.
 *
 * The built CLI, `--role grpc`, with the real Redis behind a relay that holds back the answer to the
 * first readiness probe's PING (the gRPC listener asks it once before it reports started): that
 * PING is the moment the start is settling, and it stays there until the answer is let through
 * (once the second signal is answered) or the probe's 2 s timeout.
 */

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
    const target = new URL(TEST_REDIS_URL);
    // The process's first connection carries the start's permission check (src/shared/redis-permissions.ts,
    // which ends with a PUBLISH), then the readiness probe's PING (ioredis sends none of its own).
    let checked = false;
    const redis: TcpProxy = await TcpProxy.start(
      { host: target.hostname, port: Number(target.port || 6379) },
      {
        onClientData: (chunk, connection) => {
          if (connection !== 1) return;
          const sent = chunk.toString('latin1');
          if (/\$7\r\npublish\r\n/i.test(sent)) checked = true;
          if (probed || !checked || !/\$4\r\nping\r\n/i.test(sent)) return;
          probed = true;
          redis.holdAnswers(1);
          sendFirst();
        },
      },
    );
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
          REDIS_URL: `redis://127.0.0.1:${redis.port}${target.pathname}`,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      // Never left running, whatever happens.
      const kill = setTimeout(() => child.kill('SIGKILL'), 90_000);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      let sentSecond = false;
      let released = false;
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (!sentSecond && stderr.includes('"msg":"signal while starting; stopped before serving"')) {
          sentSecond = true;
          child.kill(second);
        }
        // The second signal answered: the probe may have its PONG, and the start goes on to close.
        if (
          !released &&
          /"msg":"(already stopping|second signal while starting; exiting now)"/.test(stderr)
        ) {
          released = true;
          redis.releaseAnswers(1);
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
      await redis.cut();
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
