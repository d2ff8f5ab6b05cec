import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { describeBrowser, launchBrowser, type LaunchedBrowser } from '../helpers/browser.js';
import {
  noted,
  postgresMissing,
  REQUEST_BACK_LINE,
  REQUEST_OUTAGE_LINE,
  startAtriumBehindProxy,
  type AtriumBehindProxy,
} from '../helpers/database-outage.js';
import { memoryLog } from '../helpers/memory-log.js';
import { basic, form, freePort, pkce } from '../integration/oauth/support.js';

// On CI this throws, failing the file, when PostgreSQL does not answer; locally it skips and says why.
const pgMissing = await postgresMissing();

/** Words that belong in a log, never on a page a person reads while signing in. */
const INTERNALS =
  /ECONNREFUSED|ECONNRESET|127\.0\.0\.1|postgres|pg_|sql|kysely|stack|\.ts:\d|\bat \w+ \(|error:|terminat|went wrong/i;

/**
 * docs/deployment.md, "PostgreSQL restarting", as a person meets it: Chromium opens a sign-in link
 * while the database is away and gets the 503 page, rendered with its stylesheet and saying in
 * plain words what happened and what to do. Once the database is back, reloading the same link
 * signs in and the application gets its code and a working token.
 */
describeBrowser('the /authorize page while the database is away, in a real browser', () => {
  describe.skipIf(pgMissing !== undefined)('on PostgreSQL behind a proxy the test can cut', () => {
    let env: AtriumBehindProxy;
    let base: string;
    let chromium: LaunchedBrowser;
    let context: BrowserContext;
    let page: Page;
    let receiver: Server;
    let redirectUri: string;
    let client: { client_id: string; client_secret: string | null };
    let user: { id: string; handle: string; password: string };
    /** The process's log: the outage log's lines are warnings, every access line is info. */
    const log = memoryLog('info');

    beforeAll(async () => {
      // A real port, so the issuer in tokens and redirects is the address the browser uses.
      const port = await freePort();
      env = await startAtriumBehindProxy({ PORT: String(port) }, ['api', 'auth'], { logger: log.logger });
      base = (await env.atrium.listen()).httpUrl!;
      chromium = await launchBrowser();
      receiver = createServer((_req, res) =>
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>App</title>'),
      );
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      redirectUri = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callback`;
      client = await env.atrium.services.oauth.clients.create({
        name: 'Outage App',
        redirectUris: [redirectUri],
        scopes: ['profile:read'],
        firstParty: true,
      });
      const handle = `outage${process.pid}`;
      const password = 'correct horse battery staple';
      const created = await env.atrium.services.core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: 'Olive Outage',
        role: 'member',
        password,
      });
      user = { id: created.id, handle, password };
    }, 90_000);

    afterAll(async () => {
      await chromium?.close();
      await new Promise((resolve) => receiver?.close(resolve));
      await env?.stop();
    });

    beforeEach(async () => {
      context = await chromium.newContext();
      page = await context.newPage();
    });
    afterEach(async () => {
      await context.close();
      // Whatever a test left, the next one starts with the database there.
      await env.restoreDatabase().catch(() => undefined);
    });

    async function waitUntilReady(): Promise<void> {
      const until = Date.now() + 15_000;
      while ((await fetch(`${base}/readyz`)).status !== 200) {
        if (Date.now() > until) throw new Error('Atrium did not become ready after the database came back');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }

    /** A sign-in link as the application sends a person to it, with a fresh PKCE pair. */
    function signInLink(state: string): { link: string; verifier: string } {
      const { verifier, challenge } = pkce();
      const link = `${base}/authorize?${form({
        response_type: 'code',
        client_id: client.client_id,
        redirect_uri: redirectUri,
        scope: 'profile:read',
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
      })}`;
      return { link, verifier };
    }

    /** The 503 page as the person sees it, and as its source reads: no storage text either way. */
    async function expectUnavailablePage(shown: Page): Promise<void> {
      await expect(shown.title()).resolves.toBe('Temporarily unavailable · Atrium');
      expect(await shown.textContent('[role=alert]')).toBe(
        'The sign-in service cannot reach its database right now.',
      );
      expect(await shown.innerText('body')).not.toMatch(INTERNALS);
      expect(await shown.content()).not.toMatch(INTERNALS);
    }

    it('shows a plain 503 page, then signs in from the same link once the database is back', async () => {
      const state = `s-${Date.now()}`;
      const { link, verifier } = signInLink(state);

      await env.cutDatabase();
      const down = await page.goto(link);
      expect(down?.status()).toBe(503);
      expect(await down?.headerValue('retry-after')).toBe('1');
      await expect(page.title()).resolves.toBe('Temporarily unavailable · Atrium');
      expect(await page.textContent('h1')).toBe('The service is temporarily unavailable');
      expect(await page.textContent('[role=alert]')).toBe(
        'The sign-in service cannot reach its database right now.',
      );
      expect(await page.textContent('main')).toContain('Reload this page in a moment to try again.');
      // Rendered as designed: the stylesheet loads under the page's CSP, and no form invites a retry
      // that would only fail again.
      const radius = await page.$eval('main', (m) => getComputedStyle(m).borderRadius);
      expect(radius).toBe('12px');
      expect(await page.$$('form')).toHaveLength(0);
      const visible = await page.innerText('body');
      expect(visible).not.toMatch(INTERNALS);
      expect(await page.content()).not.toMatch(INTERNALS);

      await env.restoreDatabase();
      await waitUntilReady();
      const up = await page.reload();
      expect(up?.status()).toBe(200);
      await expect(page.title()).resolves.toBe('Sign in · Atrium');
      await page.fill('#username', user.handle);
      await page.fill('#password', user.password);
      await Promise.all([page.waitForURL(`${redirectUri}?**`), page.click('button[type=submit]')]);

      const back = new URL(page.url());
      expect(back.searchParams.get('state')).toBe(state);
      const code = back.searchParams.get('code');
      expect(code).toMatch(/^[A-Za-z0-9_-]{20,}$/);
      const token = await fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basic(client.client_id, client.client_secret!),
        },
        body: form({
          grant_type: 'authorization_code',
          code: code!,
          redirect_uri: redirectUri,
          code_verifier: verifier,
        }),
      });
      expect(token.status).toBe(200);
      const { access_token } = (await token.json()) as { access_token: string };
      const profile = await fetch(`${base}/api/user/profile`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
      expect(profile.status).toBe(200);
      expect(await profile.json()).toMatchObject({ user_id: user.id });
    }, 90_000);

    /**
     * docs/deployment.md, "What is logged while PostgreSQL is away": one person meeting the outage
     * again and again (the link, reloads, the login form sent) is one warning for the outage, and
     * signing in once the database is back is one line for its end; nothing else is logged as a
     * warning or an error, and no page the person sees names the storage.
     */
    it('logs one line for the outage however often the person meets it, and one for its end', async () => {
      const state = `log-${Date.now()}`;
      const { link } = signInLink(state);
      // The login form, loaded while the database is there, as the person starts to sign in.
      const formPage = page;
      expect((await formPage.goto(link))?.status()).toBe(200);
      await expect(formPage.title()).resolves.toBe('Sign in · Atrium');
      const before = log.lines.length;

      await env.cutDatabase();
      // The link again in a second tab, then reloaded twice: a 503 page every time.
      const tab = await context.newPage();
      const hits = [await tab.goto(link), await tab.reload(), await tab.reload()];
      for (const hit of hits) {
        expect(hit?.status()).toBe(503);
        expect(await hit?.headerValue('retry-after')).toBe('1');
      }
      await expectUnavailablePage(tab);
      // The form sent from the first tab: the same 503 page.
      await formPage.fill('#username', user.handle);
      await formPage.fill('#password', user.password);
      const [sent] = await Promise.all([
        formPage.waitForResponse((r) => r.request().method() === 'POST'),
        formPage.click('button[type=submit]'),
      ]);
      expect(sent.status()).toBe(503);
      await formPage.waitForLoadState();
      await expectUnavailablePage(formPage);
      const during = noted(log.lines.slice(before));
      expect(during.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE]);
      expect(JSON.stringify(during)).not.toContain('stack');

      await env.restoreDatabase();
      // The person reloads the link and signs in: no restart, no /readyz poll in between.
      const up = await tab.reload();
      expect(up?.status()).toBe(200);
      await expect(tab.title()).resolves.toBe('Sign in · Atrium');
      expect(await tab.innerText('body')).not.toMatch(INTERNALS);
      await tab.fill('#username', user.handle);
      await tab.fill('#password', user.password);
      await Promise.all([tab.waitForURL(`${redirectUri}?**`), tab.click('button[type=submit]')]);
      const back = new URL(tab.url());
      expect(back.searchParams.get('state')).toBe(state);
      expect(back.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{20,}$/);

      const lines = noted(log.lines.slice(before));
      expect(lines.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE, REQUEST_BACK_LINE]);
      // The end line counts the person's four failed requests (three loads and one form).
      expect(lines[1]).toMatchObject({ level: 40, failures: 4 });
    }, 90_000);
  });
});
