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

  /**
   * What a person does with their API key: paste it into the Headers tab, then run a query and a
   * subscription as themselves. The subscription watches their own draft, whose comments reach
   * only its author and admins, so an anonymous subscription would hear nothing: it shows whether
   * the Headers tab reached the subscription too (over graphql-ws it did not, and nothing said so).
   */
  it('runs a query and a subscription as the caller named in the Headers tab', async () => {
    const { services } = dev;
    const handle = `graphiql${process.pid}`;
    const user = await services.core.users.create({
      handle,
      email: `${handle}@example.com`,
      name: 'GraphiQL User',
      role: 'member',
    });
    const { key } = await services.apiKeys.create({ userId: user.id, mode: 'test' });
    const actor = { id: user.id, kind: 'user' as const, role: 'member' as const };
    const draft = await services.core.posts.create(actor, {
      title: 'Draft',
      body: 'not yet',
      authorId: user.id,
      publishAt: null,
    });

    const context = await browser.newContext();
    const page = await context.newPage();
    /** Types the headers into GraphiQL's Headers tab, as a person would (it closes the brace itself). */
    const enterHeaders = async () => {
      await page.locator('.graphiql-editor-tools button', { hasText: 'Headers' }).click();
      await page.locator('.graphiql-editor-tool .graphiql-editor').last().click();
      await page.keyboard.press('Control+A');
      await page.keyboard.type(`{"X-API-Key": "${key}"`);
    };
    // The result pane as text without its layout (CodeMirror lays lines out its own way).
    const result = async () =>
      ((await page.locator('.result-window').textContent()) ?? '').replace(/\s+/g, '');

    await page.goto(`${devUrl}/graphql?query=${encodeURIComponent('{ me { handle } }')}`);
    await page.waitForSelector('.graphiql-container', { timeout: 60_000 });
    await enterHeaders();
    await page.locator('.graphiql-execute-button').click();
    await page.waitForFunction(() => document.querySelector('.result-window')?.textContent?.includes('"me"'));
    expect(await result()).toContain(`"handle":"${handle}"`);

    const watch = `subscription { commentAdded(postId: "${draft.id}") { id body } }`;
    await page.goto(`${devUrl}/graphql?query=${encodeURIComponent(watch)}`);
    await page.waitForSelector('.graphiql-container', { timeout: 60_000 });
    await enterHeaders();
    const [stream] = await Promise.all([
      page.waitForRequest((r) => new URL(r.url()).pathname === '/graphql/stream'),
      page.locator('.graphiql-execute-button').click(),
    ]);
    // The stream opening says nothing of when the server has subscribed: add a comment each
    // second until the page shows one (an anonymous subscription never would).
    const added: string[] = [];
    const shown = async () => (await result()).includes('commentAdded');
    for (let i = 0; i < 15 && !(await shown()); i++) {
      const comment = await services.core.comments.add(actor, {
        postId: draft.id,
        authorId: user.id,
        body: `seen by its author ${i}`,
      });
      added.push(comment.id);
      await page.waitForTimeout(1_000);
    }
    const text = await result();
    expect(added.some((id) => text.includes(`"id":"${id}"`))).toBe(true);
    expect(stream.headers()['x-api-key']).toBe(key);
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
