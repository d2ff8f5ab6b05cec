import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { serve } from '../helpers/serve.js';
import { claimSqlite } from '../../src/process/sqlite-guard.js';

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
    const served = await serve({ PORT: '0', GRPC_PORT: '0' }, { asUser: { cwd } });
    let code: number | null;
    try {
      expect(served.grpc).toMatch(/:\d+$/);
      const ready = await fetch(`${served.url}/readyz`);
      expect(ready.status, await ready.text()).toBe(200);
      expect(existsSync(join(cwd, 'data', 'atrium.db'))).toBe(true);
      expect(readdirSync(join(cwd, 'data'))).toContain('atrium.db.serve-lock');
      expect(() => claimSqlite(`sqlite:${join(cwd, 'data', 'atrium.db')}`)).toThrow(
        `process ${served.child.pid} already serves it`,
      );
    } finally {
      code = await served.stop();
    }
    expect(code, served.stderr()).toBe(0);
    // The lock file stays; what matters is that the next server can take it.
    claimSqlite(`sqlite:${join(cwd, 'data', 'atrium.db')}`)!.release();
  });
});
