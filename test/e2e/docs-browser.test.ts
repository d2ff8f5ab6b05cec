import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';

/**
 * Swagger UI, ReDoc and GraphiQL rendered by a real browser, from a server with no network: the
 * pages must work from this server's assets alone. Every request the page makes is recorded, so an
 * asset from any other host (a CDN image, a font) fails the test even when it would load online,
 * and so does any console error (a 404 favicon, a refused image, a script error).
 */
describeBrowser('interactive docs in a real browser', () => {
  let atrium: TestAtrium;
  let base: string;
  let chromium: LaunchedBrowser;

  beforeAll(async () => {
    // development: GraphiQL is served outside production only.
    atrium = await startTestAtrium({ NODE_ENV: 'development', LOG_LEVEL: 'silent' });
    base = (await atrium.listen()).httpUrl!;
    chromium = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await atrium?.stop();
  });

  interface Rendered {
    dom: string;
    /** Every URL requested from another origin than this server's. */
    foreign: string[];
    /** Requests to this server that failed or answered 4xx/5xx. */
    failed: string[];
    /** console.error messages and uncaught page errors. */
    errors: string[];
  }

  /** The DOM once `selector` has appeared, with what the page asked of other hosts and complained of. */
  async function render(path: string, selector: string): Promise<Rendered> {
    const context = await chromium.newContext();
    try {
      const page = await context.newPage();
      const origin = new URL(base).origin;
      const foreign: string[] = [];
      const failed: string[] = [];
      const errors: string[] = [];
      page.on('request', (r) => {
        const url = new URL(r.url());
        // data: and blob: URLs are the page's own bytes, never a request to any host.
        if (url.protocol === 'data:' || url.protocol === 'blob:') return;
        if (url.origin !== origin) foreign.push(r.url());
      });
      page.on('requestfailed', (r) => failed.push(`${r.failure()?.errorText ?? 'failed'} ${r.url()}`));
      page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
      page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${base}${path}`);
      await page.waitForSelector(selector, { timeout: 30_000 });
      // Images (the favicon, a sidebar badge) load after the first render: let the network settle.
      await page.waitForLoadState('networkidle');
      return { dom: await page.content(), foreign, failed, errors };
    } finally {
      await context.close();
    }
  }

  it('renders Swagger UI at /docs with the API and its operations', async () => {
    const { dom, foreign, failed, errors } = await render('/docs/', '.opblock');
    expect(dom).toContain('swagger-ui');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toContain('/v1/users/{user_id}');
    // No top bar: its URL field had no label, its logo no alt text and its theme toggle no name.
    expect(dom).not.toContain('download-url-input');
    expect(dom).not.toContain('class="topbar');
    expect({ foreign, failed, errors }).toEqual({ foreign: [], failed: [], errors: [] });
  }, 90_000);

  it('renders ReDoc at /redoc with the API and its operations', async () => {
    const { dom, foreign, failed, errors } = await render('/redoc', 'h1');
    expect(dom).toContain('Atrium API');
    expect(dom).toContain('/api/v2/orders');
    expect(dom).toMatch(/Get a user/);
    // ReDoc's own "API docs by Redocly" badge is still shown, with its image from this server.
    expect(dom).toContain('API docs by Redocly');
    expect(dom).toContain('src="/redoc/logo-mini.svg"');
    expect({ foreign, failed, errors }).toEqual({ foreign: [], failed: [], errors: [] });
  }, 90_000);

  it('renders GraphiQL at /graphql with nothing from another host and no console error', async () => {
    const { foreign, failed, errors } = await render('/graphql', '.graphiql-container');
    expect({ foreign, failed, errors }).toEqual({ foreign: [], failed: [], errors: [] });
  }, 90_000);
});
