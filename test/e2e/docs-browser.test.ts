import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';

/**
 * Swagger UI and ReDoc rendered by a real browser, from a server with no network: the pages must work
 * from installed assets alone.
 */
describeBrowser('interactive docs in a real browser', () => {
  let atrium: TestAtrium;
  let base: string;
  let chromium: LaunchedBrowser;

  beforeAll(async () => {
    atrium = await startTestAtrium();
    base = (await atrium.listen()).httpUrl!;
    chromium = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await atrium?.stop();
  });

  /** The DOM once `selector` has appeared, with every request to this server that failed. */
  async function renderedDom(path: string, selector: string): Promise<{ dom: string; failed: string[] }> {
    const context = await chromium.newContext();
    try {
      const page = await context.newPage();
      const failed: string[] = [];
      // Only this server's assets count: ReDoc's own logo comes from its CDN, out of reach offline.
      const ours = (url: string) => url.startsWith(base);
      page.on('requestfailed', (r) => ours(r.url()) && failed.push(r.url()));
      page.on(
        'response',
        (r) => ours(r.url()) && r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`),
      );
      await page.goto(`${base}${path}`);
      await page.waitForSelector(selector, { timeout: 30_000 });
      return { dom: await page.content(), failed };
    } finally {
      await context.close();
    }
  }

  it('renders Swagger UI at /docs with the API and its operations', async () => {
    const { dom, failed } = await renderedDom('/docs/', '.opblock');
    expect(dom).toContain('swagger-ui');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toContain('/v1/users/{user_id}');
    expect(failed).toEqual([]);
  }, 90_000);

  it('renders ReDoc at /redoc with the API and its operations', async () => {
    const { dom, failed } = await renderedDom('/redoc', 'h1');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toMatch(/Get a user/);
    expect(failed).toEqual([]);
  }, 90_000);
});
