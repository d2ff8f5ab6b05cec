import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oauth from 'oauth4webapi';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, afterEach, expect, it } from 'vitest';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';
import { discover, insecure, startOAuthServer, type OAuthTestServer } from '../integration/oauth/support.js';

const PASSWORD = 'correct horse battery staple';
const REFUSED = 'This form expired or was sent from another site';

/** A loopback HTTP server that records every request: the client's redirect URI, or a foreign site. */
interface Site {
  origin: string;
  hits: URL[];
  close(): Promise<void>;
}

async function startSite(host: string, html: (url: URL) => string): Promise<Site> {
  const hits: URL[] = [];
  let origin = '';
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', origin);
    // The browser's own favicon request is not a visit.
    if (url.pathname !== '/favicon.ico') hits.push(url);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html(url));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://${host}:${(server.address() as AddressInfo).port}`;
  return { origin, hits, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/**
 * The whole authorization-code + PKCE flow as a person goes through it, in Chromium against a
 * listening Atrium: login page, consent page of a third-party client, redirect to the client's
 * loopback receiver with `code` and `state`, the client's token exchange (oauth4webapi) and a
 * protected call. Then what must still be refused, and the error pages.
 */
describeBrowser('signing in through /authorize in a real browser', () => {
  let server: OAuthTestServer;
  let chromium: LaunchedBrowser;
  let receiver: Site;
  let as: oauth.AuthorizationServer;
  let client: oauth.Client;
  let clientSecret: string;
  let redirectUri: string;
  let userId: string;
  let handle: string;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    server = await startOAuthServer();
    chromium = await launchBrowser();
    receiver = await startSite(
      '127.0.0.1',
      () => '<!doctype html><title>Client</title><p>back at the client</p>',
    );
    redirectUri = `${receiver.origin}/callback`;
    const { services } = server.atrium;
    handle = `alice${process.pid}`;
    const user = await services.core.users.create({
      handle,
      email: `${handle}@example.com`,
      name: 'Alice Example',
      role: 'member',
      password: PASSWORD,
    });
    userId = user.id;
    const created = await services.oauth.clients.create({
      name: 'Third Party Reader',
      redirectUris: [redirectUri],
      scopes: ['profile:read', 'orders:read'],
    });
    client = { client_id: created.client_id };
    clientSecret = created.client_secret!;
    as = await discover(server);
  }, 90_000);

  afterAll(async () => {
    await chromium?.close();
    await receiver?.close();
    await server?.stop();
  });

  beforeEach(async () => {
    context = await chromium.newContext();
    page = await context.newPage();
    receiver.hits.length = 0;
  });
  afterEach(async () => {
    await context.close();
  });

  async function authorizationUrl(
    overrides: Record<string, string> = {},
  ): Promise<{ url: string; verifier: string; state: string }> {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    const values = {
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: redirectUri,
      scope: 'profile:read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...overrides,
    };
    for (const [k, v] of Object.entries(values)) url.searchParams.set(k, v);
    return { url: url.href, verifier, state };
  }

  /** Clicks a submit button and returns the status of the POST /authorize it sends. */
  async function submit(button: string): Promise<number> {
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/authorize')),
      page.click(button),
    ]);
    return response.status();
  }

  it('completes login, consent, redirect with code and state, token exchange and a protected call', async () => {
    const { url, verifier, state } = await authorizationUrl();

    const login = await page.goto(url);
    expect(login?.status()).toBe(200);
    await expect(page.title()).resolves.toBe('Sign in · Atrium');
    expect(await page.textContent('main')).toContain('Third Party Reader');
    // The browser really holds the CSRF cookie (HttpOnly, SameSite=Lax, not Secure on http).
    const [cookie] = await context.cookies(server.url);
    expect(cookie).toMatchObject({ name: 'atrium_csrf', httpOnly: true, sameSite: 'Lax', secure: false });

    await page.fill('#username', handle);
    await page.fill('#password', PASSWORD);
    expect(await submit('button[type=submit]')).toBe(200);
    await expect(page.title()).resolves.toBe('Allow access · Atrium');
    expect(await page.textContent('h1')).toBe('Allow Third Party Reader to use your account?');
    expect(await page.textContent('.scopes')).toContain('profile:read');
    expect(await page.textContent('.scopes')).not.toContain('orders:read');
    // The person is told what a scope allows in the words the OpenAPI document gives developers.
    const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      components: { securitySchemes: Record<string, { flows?: { authorizationCode?: { scopes: object } } }> };
    };
    const documented = Object.values(openapi.components.securitySchemes).find((s) => s.flows)?.flows
      ?.authorizationCode?.scopes as Record<string, string>;
    expect(await page.textContent('.scopes .scope')).toBe(documented['profile:read']);

    await Promise.all([page.waitForURL(`${redirectUri}?**`), submit('button[value=approve]')]);
    expect(receiver.hits).toHaveLength(1);
    const back = new URL(page.url());
    expect(back.origin + back.pathname).toBe(redirectUri);
    expect(back.searchParams.get('state')).toBe(state);
    expect(back.searchParams.get('iss')).toBe(server.url);
    expect(back.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{20,}$/);

    const params = oauth.validateAuthResponse(as, client, back, state);
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      oauth.ClientSecretBasic(clientSecret),
      params,
      redirectUri,
      verifier,
      insecure,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, response);
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.scope).toBe('profile:read');
    expect(tokens.refresh_token).toBeTypeOf('string');

    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(profile.status).toBe(200);
    expect(await profile.json()).toMatchObject({ user_id: userId, scopes: ['profile:read'] });
    // The token carries only what was granted.
    const orders = await fetch(`${server.url}/api/v2/orders`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(orders.status).toBe(403);
  }, 90_000);

  it('sends the client back with access_denied when the user denies', async () => {
    const { url, state } = await authorizationUrl();
    await page.goto(url);
    await page.fill('#username', handle);
    await page.fill('#password', PASSWORD);
    await submit('button[type=submit]');
    await Promise.all([page.waitForURL(`${redirectUri}?**`), submit('button[value=deny]')]);
    const back = new URL(page.url());
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe(state);
    expect(back.searchParams.get('code')).toBeNull();
  }, 60_000);

  it('shows the login page again for a wrong password, with the error announced', async () => {
    const { url } = await authorizationUrl();
    await page.goto(url);
    await page.fill('#username', handle);
    await page.fill('#password', 'not the password');
    expect(await submit('button[type=submit]')).toBe(400);
    expect(await page.textContent('[role=alert]')).toBe('The username or password is incorrect.');
    expect(await page.inputValue('#username')).toBe(handle);
    // Announced to a screen reader: in the title, read first; on each field, read as focus enters
    // it; and focus starts on the password to retype.
    expect(await page.title()).toBe('Error: Sign in · Atrium');
    for (const field of ['#username', '#password'])
      expect(await page.getAttribute(field, 'aria-describedby')).toBe('form-error');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('password');
    expect(receiver.hits).toHaveLength(0);
  }, 60_000);

  it('fits a 320 px wide screen without sideways scrolling, under a long client name too', async () => {
    const long = await server.atrium.services.oauth.clients.create({
      name: 'AcmeCorporationInternationalOrderSynchronisationService',
      redirectUris: [redirectUri],
      scopes: ['profile:read'],
    });
    await page.setViewportSize({ width: 320, height: 640 });
    const overflow = () =>
      page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    for (const clientId of [client.client_id, long.client_id]) {
      const { url } = await authorizationUrl({ client_id: clientId });
      await page.goto(url);
      expect(await overflow(), `login, ${clientId}`).toBe(0);
      await page.fill('#username', handle);
      await page.fill('#password', PASSWORD);
      expect(await submit('button[type=submit]')).toBe(200);
      expect(await page.textContent('h1')).toContain('to use your account?');
      expect(await overflow(), `consent, ${clientId}`).toBe(0);
    }
  }, 60_000);

  it('draws the keyboard focus ring at 3:1 contrast or more against the page', async () => {
    const { url } = await authorizationUrl();
    await page.goto(url);
    await page.keyboard.press('Tab');
    const colours = await page.evaluate(() => {
      const focused = document.activeElement as HTMLElement;
      return {
        ring: getComputedStyle(focused).outlineColor,
        page: getComputedStyle(document.body).backgroundColor,
      };
    });
    expect(contrast(colours.ring, colours.page), JSON.stringify(colours)).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it('refuses a login form posted from another site, even with valid credentials and a CSRF cookie', async () => {
    // The victim's browser has seen the real login page (and holds its CSRF cookie); then a page on
    // another site posts a complete login form to /authorize (login CSRF).
    const { url } = await authorizationUrl();
    await page.goto(url);
    const fields = Object.fromEntries(
      await page.$$eval('form input[type=hidden]', (inputs) =>
        inputs.map((i) => [i.getAttribute('name') ?? '', i.getAttribute('value') ?? '']),
      ),
    ) as Record<string, string>;
    const attackerFields = { ...fields, username: handle, password: PASSWORD, consent: 'approve' };
    const attacker = await startSite('localhost', () => {
      const inputs = Object.entries(attackerFields)
        .map(([k, v]) => `<input type="hidden" name="${k}" value="${v.replace(/"/g, '&quot;')}">`)
        .join('');
      return `<!doctype html><title>Win a prize</title>
        <form id="f" method="post" action="${server.url}/authorize">${inputs}<button>Claim</button></form>`;
    });
    try {
      await page.goto(`${attacker.origin}/`);
      const status = await submit('#f button');
      expect(status).toBe(403);
      expect(await page.textContent('[role=alert]')).toContain(REFUSED);
      expect(receiver.hits).toHaveLength(0);
    } finally {
      await attacker.close();
    }
  }, 60_000);

  it('signs in from the older of two tabs, both opened from a client on another site', async () => {
    // A client's page on another site (localhost, against the server's 127.0.0.1) links to
    // /authorize; the person opens it twice, then signs in in the first tab. A SameSite=Strict
    // cookie was not sent on those cross-site navigations, so the second tab's cookie replaced the
    // first's and the first tab's form was refused as "from another site".
    const { url, state } = await authorizationUrl();
    const clientSite = await startSite(
      'localhost',
      () =>
        `<!doctype html><title>Client home</title><a id="signin" href="${url.replace(/&/g, '&amp;')}">Sign in</a>`,
    );
    try {
      const openTab = async (tab: Page) => {
        await tab.goto(`${clientSite.origin}/`);
        await Promise.all([tab.waitForURL(`${server.url}/authorize?**`), tab.click('#signin')]);
        await expect(tab.title()).resolves.toBe('Sign in · Atrium');
      };
      await openTab(page);
      const second = await context.newPage();
      await openTab(second);

      await page.fill('#username', handle);
      await page.fill('#password', PASSWORD);
      expect(await submit('button[type=submit]')).toBe(200);
      await expect(page.title()).resolves.toBe('Allow access · Atrium');
      await Promise.all([page.waitForURL(`${redirectUri}?**`), submit('button[value=approve]')]);
      const back = new URL(page.url());
      expect(back.searchParams.get('state')).toBe(state);
      expect(back.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    } finally {
      await clientSite.close();
    }
  }, 60_000);

  it('sends a login page opened at another name for the server (localhost) to AUTH_URL, where signing in works', async () => {
    const { url, state } = await authorizationUrl();
    const alias = url.replace('http://127.0.0.1:', 'http://localhost:');
    expect(alias).not.toBe(url);
    expect((await page.goto(alias))?.status()).toBe(200);
    await page.fill('#username', handle);
    await page.fill('#password', PASSWORD);
    // The form cannot be accepted there (its origin is not AUTH_URL's); it is not refused as a
    // foreign site's either: the same request, at AUTH_URL.
    const [landed] = await Promise.all([
      page.waitForRequest((r) => r.url().startsWith(`${server.url}/authorize?`)),
      page.click('button[type=submit]'),
    ]);
    const posted = landed.redirectedFrom();
    expect(posted?.method()).toBe('POST');
    expect(posted?.url()).toBe(alias.split('?')[0]);
    expect((await posted?.response())?.status()).toBe(302);
    await page.waitForURL(`${server.url}/authorize?**`);
    expect(new URL(page.url()).searchParams.get('state')).toBe(state);
    expect(new URL(page.url()).searchParams.get('password')).toBeNull();
    await expect(page.title()).resolves.toBe('Sign in · Atrium');
    expect(receiver.hits).toHaveLength(0);

    await page.fill('#username', handle);
    await page.fill('#password', PASSWORD);
    expect(await submit('button[type=submit]')).toBe(200);
    await Promise.all([page.waitForURL(`${redirectUri}?**`), submit('button[value=approve]')]);
    expect(new URL(page.url()).searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
  }, 60_000);

  it('renders the error page, and never redirects, for an unknown client or an inexact redirect URI', async () => {
    const cases: Record<string, string>[] = [
      { client_id: 'cli_unknown0000000000000000000' },
      { redirect_uri: `${receiver.origin}/elsewhere` },
      { redirect_uri: 'https://evil.example/callback' },
    ];
    for (const overrides of cases) {
      const { url } = await authorizationUrl(overrides);
      const response = await page.goto(url);
      expect(response?.status()).toBe(400);
      expect(page.url()).toBe(url);
      await expect(page.title()).resolves.toBe('Cannot continue · Atrium');
      expect(await page.textContent('h1')).toBe('This sign-in request cannot continue');
      expect(await page.textContent('[role=alert]')).not.toBe('');
      // Its stylesheet loads under the page's own CSP.
      const styled = await page.$eval(
        'main',
        (m) => m.ownerDocument.defaultView!.getComputedStyle(m).borderRadius,
      );
      expect(styled).toBe('12px');
    }
    expect(receiver.hits).toHaveLength(0);
  }, 60_000);
});

/** WCAG contrast ratio of two computed `rgb(...)` colours. */
function contrast(a: string, b: string): number {
  const luminance = (colour: string): number => {
    const [r, g, b] = (colour.match(/[\d.]+/g) ?? []).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}
