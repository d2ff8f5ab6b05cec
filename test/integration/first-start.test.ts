import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../helpers/cli.js';
import { ensureBuilt } from './cluster/support.js';

/**
 * `npm start` in a fresh clone: `node bin/atrium.js serve` with no configuration at all, in a
 * folder that has no ./data yet. Every other test hands the service a database in a folder that
 * exists; this one found the first start failing with ENOENT on the SQLite lock file.
 */
describe('the first npm start in a fresh clone', { timeout: 120_000 }, () => {
  let cwd: string;
  beforeAll(() => {
    ensureBuilt();
    cwd = mkdtempSync(join(tmpdir(), 'atrium-first-start-'));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it('creates ./data, serves every role on the default SQLite file, and drains to exit 0', async () => {
    expect(existsSync(join(cwd, 'data'))).toBe(false);
    // Ports 0: the defaults (3000, 50051) may be in use beside the suite; nothing else is set.
    const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve'], {
      cwd,
      env: { PATH: process.env.PATH ?? '', PORT: '0', GRPC_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      const started = await new Promise<{ http: string; grpc: string }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start line: ${output}`)), 60_000);
        const check = () => {
          const line = output.split('\n').find((l) => l.includes('"atrium started"'));
          if (line === undefined) return;
          clearTimeout(timer);
          resolve(JSON.parse(line) as { http: string; grpc: string });
        };
        child.stdout.on('data', check);
        child.stderr.on('data', check);
        void exit.then((code) => reject(new Error(`exited ${code} before starting: ${output}`)));
      });
      expect(started.grpc).toMatch(/:\d+$/);
      const ready = await fetch(`${started.http}/readyz`);
      expect(ready.status, await ready.text()).toBe(200);
      expect(existsSync(join(cwd, 'data', 'atrium.db'))).toBe(true);
      expect(readdirSync(join(cwd, 'data'))).toContain('atrium.db.serve-lock');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exit, output).toBe(0);
    expect(readdirSync(join(cwd, 'data'))).not.toContain('atrium.db.serve-lock');
  });
});
