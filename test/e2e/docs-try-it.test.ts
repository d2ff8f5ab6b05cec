import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { seedClients } from '../../src/seed/clients.js';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';
import { startOAuthServer, type OAuthTestServer } from '../integration/oauth/support.js';

const PASSWORD = 'correct horse battery staple';

/**
 * What the README promises a person at /docs: **Authorize** with an API key, or sign in through
 * the token server (authorization code with PKCE, Swagger UI's own popup and
 * `oauth2-redirect.html`), then **Try it out** and **Execute** against this server. Rendering the
 * page (docs-browser.test.ts) says nothing of whether the requests it builds work: a wrong server
 * URL, a redirect URI the client cannot match, a CORS or cookie rule, or a token request Swagger
 * UI shapes differently from an OAuth library would each break here and only here.
 */
describeBrowser('calling the API from Swagger UI in a real browser', () => {
  let server: OAuthTestServer;
  let chromium: LaunchedBrowser;
  let context: BrowserContext;
  let page: Page;
  let userId: string;
  let email: string;
  let apiKey: string;
  let orderId: string;
  let publicClientId: string;
  let service: { client_id: string; client_secret: string | null };
  let errors: string[];

  beforeAll(async () => {
    server = await startOAuthServer();
    chromium = await launchBrowser();
    const { services } = server.atrium;
    const handle = `docsuser${process.pid}`;
    email = `${handle}@example.com`;
    const user = await services.core.users.create({
      handle,
      email,
      name: 'Docs User',
      role: 'member',
      password: PASSWORD,
    });
    userId = user.id;
    apiKey = (await services.apiKeys.create({ userId, tier: 'growth', mode: 'test' })).key;
    const actor = { id: userId, kind: 'user' as const, role: 'member' as const };
    const product = await services.core.products.create({ name: 'Lamp', priceCents: 1250 });
    orderId = (
      await services.core.orders.create(actor, {
        items: [{ productId: product.id, quantity: 2 }],
        currency: 'EUR',
        shippingAddress: { name: 'D U', street: 'Main 1', city: 'Lyon', postalCode: '69001', country: 'FR' },
      })
    ).id;
    // Registered as `atrium seed` registers its single-page app: Swagger UI's redirect page on
    // the origin the page is opened at.
    const client = await services.oauth.clients.create({
      name: 'API docs',
      public: true,
      redirectUris: [`${server.url}/docs/static/oauth2-redirect.html`],
      scopes: ['profile:read', 'orders:read'],
    });
    publicClientId = client.client_id;
    // A confidential client for the client-credentials flow, acting for the docs user.
    service = await services.oauth.clients.create({
      name: 'Docs service',
      scopes: ['orders:read'],
      userId,
    });
  }, 90_000);

  afterAll(async () => {
    await chromium?.close();
    await server?.stop();
  });

  beforeEach(async () => {
    context = await chromium.newContext();
    page = await context.newPage();
    errors = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/docs/`);
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    // The page's own 30 s for Swagger UI to render, plus the new context and the load: on a loaded
    // machine the hook's default 30 s ran out before the page did.
  }, 60_000);
  afterEach(async () => {
    await context.close();
  });

  /** The dialog's section for one security scheme, found by the name Swagger UI shows. */
  const scheme = (title: string) =>
    page.locator('.modal-ux .auth-container').filter({ hasText: title }).first();

  async function openAuthorize(): Promise<void> {
    await page.click('.auth-wrapper button.authorize');
    await page.waitForSelector('.modal-ux');
  }

  /** Expands the operation, presses Try it out and Execute; its status and body as shown. */
  async function execute(method: string, path: string): Promise<{ status: number; body: unknown }> {
    const op = page
      .locator(`.opblock-${method}`)
      .filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) })
      .first();
    await op.locator('.opblock-summary').click();
    await op.locator('button.try-out__btn').click();
    const [response] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname.startsWith(path.replace(/\{.*$/, ''))),
      op.locator('button.execute').click(),
    ]);
    // What the page shows must be what the server answered: Swagger UI renders the live response.
    const shown = op.locator('.live-responses-table tbody .response-col_status').first();
    await shown.waitFor();
    const status = Number((await shown.innerText()).trim());
    expect(status).toBe(response.status());
    const text = await op.locator('.live-responses-table tbody .microlight').first().innerText();
    return { status, body: JSON.parse(text) as unknown };
  }

  it('lists the caller’s orders with an API key entered under Authorize', async () => {
    await openAuthorize();
    const box = scheme('apiKey');
    await box.locator('input').first().fill(apiKey);
    await box.locator('button.authorize').click();
    // Swagger UI confirms under the scheme's name, and offers to log out of it.
    await box.locator('h6', { hasText: 'Authorized' }).waitFor();
    await page.click('.modal-ux button.btn-done');

    const { status, body } = await execute('get', '/api/v2/orders');
    expect(status).toBe(200);
    const list = body as { data: { id: string; owner_id: string }[] };
    expect(list.data.map((o) => o.id)).toEqual([orderId]);
    expect(list.data[0]!.owner_id).toBe(userId);
    expect(errors).toEqual([]);
  }, 90_000);

  it('answers 401 in the spec’s error shape when the key entered is wrong', async () => {
    await openAuthorize();
    const box = scheme('apiKey');
    await box.locator('input').first().fill('atr_test_00000000000000000000000000000000_000000');
    await box.locator('button.authorize').click();
    await page.click('.modal-ux button.btn-done');

    const { status, body } = await execute('get', '/api/v2/orders');
    expect(status).toBe(401);
    expect(body).toMatchObject({ error: 'invalid_api_key', request_id: expect.any(String) });
    // A 401 shown to the person is the page working, not a script error; the browser itself
    // logs the failed fetch, which is all that may appear.
    expect(errors.filter((e) => !/status of 401/.test(e))).toEqual([]);
  }, 90_000);

  it('signs in through the token server’s pages in Swagger UI’s popup and calls with that token', async () => {
    await openAuthorize();
    const box = scheme('authorizationCode');
    await box.locator('input#client_id_authorizationCode, input[type=text]').first().fill(publicClientId);
    await box.locator('label').filter({ hasText: 'profile:read' }).first().click();
    const [popup] = await Promise.all([page.waitForEvent('popup'), box.locator('button.authorize').click()]);
    await popup.waitForSelector('input[type=password]');
    const authorize = new URL(popup.url());
    expect(authorize.pathname).toBe('/authorize');
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${server.url}/docs/static/oauth2-redirect.html`);

    await popup.locator('input[type=password]').fill(PASSWORD);
    await popup.locator('input:not([type=password]):not([type=hidden])').first().fill(email);
    await Promise.all([popup.waitForSelector('button[value=approve]'), popup.click('button[type=submit]')]);
    expect(await popup.locator('body').innerText()).toContain('profile:read');
    // Approving redirects the popup to oauth2-redirect.html, which hands the code to the page
    // and closes the popup; the page then exchanges it at /oauth/token with its PKCE verifier.
    const [token] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/oauth/token'),
      popup.waitForEvent('close'),
      popup.click('button[value=approve]'),
    ]);
    expect(token.status()).toBe(200);
    await box.locator('h6', { hasText: 'Authorized' }).waitFor();
    await page.click('.modal-ux button.btn-done');

    const { status, body } = await execute('get', '/api/user/profile');
    expect(status).toBe(200);
    expect(body).toMatchObject({ user_id: userId, scopes: ['profile:read'] });
    expect((body as { token_expires: string }).token_expires).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(errors).toEqual([]);
  }, 90_000);

  it('signs in with the seeded single-page app and every scope selected, then lists orders', async () => {
    // The client `atrium seed` registers for Swagger UI, by the seed's own code: registered for
    // fewer scopes than the document offers, so "select all" asks for more than it may have.
    const spa = (await seedClients(server.atrium.services, userId)).find((c) => c.kind === 'public')!;
    expect(spa.redirect_uris).toContain(`${server.url}/docs/static/oauth2-redirect.html`);
    await openAuthorize();
    const box = scheme('authorizationCode');
    await box.locator('input#client_id_authorizationCode, input[type=text]').first().fill(spa.client_id);
    await box.locator('.scopes h2 a', { hasText: 'select all' }).click();
    const boxes = box.locator('.scopes input[type=checkbox]');
    const offered = await boxes.count();
    expect(offered).toBeGreaterThan(spa.scopes.length);
    for (let i = 0; i < offered; i++) expect(await boxes.nth(i).isChecked()).toBe(true);

    const [popup] = await Promise.all([page.waitForEvent('popup'), box.locator('button.authorize').click()]);
    await popup.waitForSelector('input[type=password]');
    const asked = new URL(popup.url()).searchParams.get('scope')!.split(' ');
    expect(asked).toHaveLength(offered);
    await popup.locator('input[type=password]').fill(PASSWORD);
    await popup.locator('input:not([type=password]):not([type=hidden])').first().fill(email);
    await Promise.all([popup.waitForSelector('button[value=approve]'), popup.click('button[type=submit]')]);
    // The consent page names the client's scopes, and none of those it is not registered for.
    const consent = await popup.locator('body').innerText();
    for (const s of spa.scopes) expect(consent).toContain(s);
    for (const s of asked.filter((s) => !spa.scopes.includes(s))) expect(consent).not.toContain(s);
    const [token] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/oauth/token'),
      popup.waitForEvent('close'),
      popup.click('button[value=approve]'),
    ]);
    expect(token.status()).toBe(200);
    const issued = ((await token.json()) as { scope: string }).scope.split(' ');
    expect(issued).toContain('orders:read');
    expect(issued.every((s) => spa.scopes.includes(s))).toBe(true);
    await box.locator('h6', { hasText: 'Authorized' }).waitFor();
    await page.click('.modal-ux button.btn-done');

    const [request] = await Promise.all([
      page.waitForRequest((r) => new URL(r.url()).pathname === '/api/v2/orders'),
      execute('get', '/api/v2/orders').then(({ status, body }) => {
        expect(status).toBe(200);
        expect((body as { data: { id: string }[] }).data.map((o) => o.id)).toEqual([orderId]);
      }),
    ]);
    expect(request.headers().authorization).toMatch(/^Bearer \S+$/);
    expect(errors).toEqual([]);
  }, 120_000);

  it('authorizes with client credentials and lists orders with that token', async () => {
    await openAuthorize();
    const box = scheme('clientCredentials');
    await box.locator('input#client_id_clientCredentials').fill(service.client_id);
    await box.locator('input#client_secret_clientCredentials').fill(service.client_secret!);
    await box.locator('label').filter({ hasText: 'orders:read' }).first().click();
    const [token] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/oauth/token'),
      box.locator('button.authorize').click(),
    ]);
    expect(token.status()).toBe(200);
    await box.locator('h6', { hasText: 'Authorized' }).waitFor();
    await page.click('.modal-ux button.btn-done');

    // Swagger UI sends the token only to operations whose security lists the oauth2 scheme.
    const [request] = await Promise.all([
      page.waitForRequest((r) => new URL(r.url()).pathname === '/api/v2/orders'),
      execute('get', '/api/v2/orders').then(({ status, body }) => {
        expect(status).toBe(200);
        expect((body as { data: unknown[] }).data).toEqual(expect.any(Array));
      }),
    ]);
    expect(request.headers().authorization).toMatch(/^Bearer \S+$/);
    expect(errors).toEqual([]);
  }, 150_000);

  it('calls this server when the page is opened at another name for the host than PUBLIC_URL', async () => {
    // PUBLIC_URL is http://127.0.0.1:PORT; the same server at http://localhost:PORT is another
    // origin, which an absolute server URL would send every request to, cross-origin.
    const local = server.url.replace('127.0.0.1', 'localhost');
    await page.goto(`${local}/docs/`);
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    await openAuthorize();
    const box = scheme('apiKey');
    await box.locator('input').first().fill(apiKey);
    await box.locator('button.authorize').click();
    await box.locator('h6', { hasText: 'Authorized' }).waitFor();
    await page.click('.modal-ux button.btn-done');

    const [request] = await Promise.all([
      page.waitForRequest((r) => new URL(r.url()).pathname === '/api/v2/orders'),
      execute('get', '/api/v2/orders').then(({ status, body }) => {
        expect(status).toBe(200);
        expect((body as { data: { id: string }[] }).data.map((o) => o.id)).toEqual([orderId]);
      }),
    ]);
    expect(new URL(request.url()).origin).toBe(local);
    expect(errors).toEqual([]);
  }, 90_000);
});
