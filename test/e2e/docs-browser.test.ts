import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';

const run = promisify(execFile);
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/**
 * Swagger UI and ReDoc rendered by a real browser, from a server with no network: the pages must work
 * from installed assets alone. `.ci/run` installs Debian's Chromium; without it these are skipped.
 */
describe.skipIf(!CHROMIUM)('interactive docs in a real browser', () => {
  let atrium: TestAtrium;
  let base: string;
  let profile: string;

  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
    profile = mkdtempSync(join(tmpdir(), 'atrium-chromium-'));
  });
  afterAll(async () => {
    await atrium.stop();
    rmSync(profile, { recursive: true, force: true });
  });

  async function renderedDom(path: string): Promise<string> {
    const { stdout } = await run(
      CHROMIUM!,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        '--virtual-time-budget=15000',
        '--dump-dom',
        `${base}${path}`,
      ],
      { timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
    );
    return stdout;
  }

  it('renders Swagger UI at /docs with the API and its operations', async () => {
    const dom = await renderedDom('/docs/');
    expect(dom).toContain('swagger-ui');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toContain('/v1/users/{user_id}');
  }, 90_000);

  it('renders ReDoc at /redoc with the API and its operations', async () => {
    const dom = await renderedDom('/redoc');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toMatch(/Get a user/);
  }, 90_000);
});
