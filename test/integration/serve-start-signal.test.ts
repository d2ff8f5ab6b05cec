import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { root } from '../helpers/cli.js';

/**
 * README: SIGTERM drains and exits 0. A SIGTERM while `atrium serve` was still starting (a
 * supervisor stopping a deployment a second after starting it) killed the process: status 143 and
 * no log line. The built CLI, as `npm start` runs it; the signal goes once the start has claimed its
 * SQLite file (`<file>.serve-lock`), before the migrations and the listeners are done.
 */
describe('a stop signal during the start', { timeout: 120_000 }, () => {
  let cwd: string;
  beforeAll(() => {
    ensureBuilt();
    cwd = mkdtempSync(join(tmpdir(), 'atrium-start-signal-'));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} ends the start with exit 0 and a log line`, async () => {
      const folder = mkdtempSync(join(cwd, 'run-'));
      const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve'], {
        cwd: folder,
        env: { PATH: process.env.PATH ?? '', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'info' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const lock = join(folder, 'data', 'atrium.db.serve-lock');
      const deadline = Date.now() + 60_000;
      while (!existsSync(lock) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      child.kill(signal);
      const code = await exited;
      expect(code, stderr).toBe(0);
      const lines = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; signal?: string });
      // Stopped before it served: the start's own line, not a drain after "atrium started".
      expect(lines.map((l) => l.msg)).not.toContain('atrium started');
      expect(lines.find((l) => l.signal === signal)?.msg).toBe(
        'signal while starting; stopped before serving',
      );
    });
  }
});
