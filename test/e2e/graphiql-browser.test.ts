import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';

/**
 * GraphiQL at GET /graphql in a real browser: rendered from the installed package with every other
 * host blocked (no CDN), running a query against the server; absent in production.
 */
describeBrowser('GraphiQL in headless Chromium', () => {
  let browser: LaunchedBrowser;
  let dev: TestAtrium;
  let prod: TestAtrium;
  let devUrl: string;
  let prodUrl: string;

  beforeAll(async () => {
    browser = await launchBrowser();
    dev = await startTestAtrium({ NODE_ENV: 'development' });
    prod = await startTestAtrium({ NODE_ENV: 'production' });
    devUrl = (await dev.listen()).httpUrl!;
    prodUrl = (await prod.listen()).httpUrl!;
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
    await prod?.stop();
  });

  it('renders GraphiQL in development from local assets and runs a query', async () => {
    const context = await browser.newContext();
    const foreign: string[] = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === 'blob:' || url.protocol === 'data:' || url.origin === devUrl)
        return route.continue();
      foreign.push(url.href);
      return route.abort();
    });
    const page = await context.newPage();
    await page.goto(`${devUrl}/graphql?query=${encodeURIComponent('{ __typename }')}`);
    await page.waitForSelector('.graphiql-container', { timeout: 60_000 });
    await page.locator('.graphiql-execute-button').click();
    await page.waitForFunction(
      () => document.querySelector('.result-window')?.textContent?.includes('"Query"'),
      null,
      {
        timeout: 30_000,
      },
    );
    expect(await page.locator('.result-window').textContent()).toMatch(/"__typename":\s*"Query"/);
    expect(foreign).toEqual([]);
    await context.close();
  }, 120_000);

  it('serves no GraphiQL in production', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(`${prodUrl}/graphql`);
    expect(response?.headers()['content-type'] ?? '').not.toContain('text/html');
    expect(await page.locator('.graphiql-container').count()).toBe(0);
    await context.close();
  }, 60_000);
});
