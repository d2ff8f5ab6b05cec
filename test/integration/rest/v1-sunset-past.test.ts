import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../../helpers/build.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { type Served, serve } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';

/**
 * A V1_SUNSET already past (spec, "Deprecated REST version": a version is retired only after its
 * sunset date) is said once at start, as a warning, by a process that serves /api/v1 (the api
 * role); the process still starts and v1 still answers. Until 2026-11-29 it was accepted silently,
 * and every v1 response announced a Sunset that had passed. Through the built CLI's log.
 */

const WARNING = 'V1_SUNSET is in the past';

type Line = { level?: number; msg?: string; v1_sunset?: string };
const lines = (served: Served): Line[] =>
  served
    .stderr()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);

describe('V1_SUNSET in the past', { timeout: 240_000 }, () => {
  let database: TestDatabase;
  let cwd: string;
  const env = (sunset: string) => ({
    DATABASE_URL: database.url,
    V1_SUNSET: sunset,
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_PORT: '0',
    LOG_LEVEL: 'info',
  });

  beforeAll(async () => {
    ensureBuilt();
    database = await freshDatabase();
    cwd = mkdtempSync(join(tmpdir(), 'v1-sunset-'));
  }, 240_000);
  afterAll(async () => {
    await database?.drop();
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  /** Serves, runs `check` on the process, then stops it and returns every line it logged. */
  async function served(sunset: string, roles: string, check?: (s: Served) => Promise<void>) {
    const s = await serve(env(sunset), { asUser: { cwd }, roles });
    try {
      await check?.(s);
    } finally {
      expect(await s.stop()).toBe(0);
    }
    // Everything logged before the drain has been read once its last line has.
    await until(() => s.stderr().includes('"msg":"stopped"'), 'the last log line', 10_000);
    return lines(s);
  }

  it('the api role starts, warns once, and v1 goes on answering with the date given', async () => {
    const logged = await served('2020-01-01', 'api', async (s) => {
      const v1 = await fetch(`${s.url}/api/v1/orders`);
      expect(v1.headers.get('sunset')).toBe('Wed, 01 Jan 2020 00:00:00 GMT');
      expect(v1.headers.get('deprecation')).toBe('true');
    });
    const warnings = logged.filter((l) => l.msg?.startsWith(WARNING));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, v1_sunset: '2020-01-01' });
    expect(warnings[0]!.msg).toContain('at least 12 months');
  });

  it('a date ahead is not warned about', async () => {
    const logged = await served('2099-12-31', 'api');
    expect(logged.filter((l) => l.msg?.includes('V1_SUNSET'))).toEqual([]);
  });

  it('a process without the api role (no /api/v1) does not warn', async () => {
    const logged = await served('2020-01-01', 'worker');
    expect(logged.filter((l) => l.msg?.includes('V1_SUNSET'))).toEqual([]);
  });
});
