import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { describe, it } from 'vitest';

/**
 * The one way browser tests find and start Chromium: Debian's `chromium` (which `.ci/run`
 * installs) driven by playwright-core, or the binary named by `CHROMIUM_PATH`.
 */
const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

export const CHROMIUM_PATH: string | undefined = CANDIDATES.find(
  (p): p is string => typeof p === 'string' && p !== '' && existsSync(p),
);

const MISSING =
  'Chromium was not found (looked for $CHROMIUM_PATH, /usr/bin/chromium, /usr/bin/chromium-browser); ' +
  'install it with `apt-get install -y chromium`';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // No name resolves but localhost: a page that needs the network (a CDN asset, a font) breaks in
  // the test as it would on an offline machine, and Chromium's own calls to Google services
  // (update, accounts, autofill), which the flags above leave, never leave this machine.
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
];

export interface LaunchedBrowser {
  browser: Browser;
  /** A fresh, isolated profile (cookies, storage) in the running browser. */
  newContext(): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Starts headless Chromium (playwright gives it a throw-away profile); fails when it is missing. */
export async function launchBrowser(): Promise<LaunchedBrowser> {
  if (!CHROMIUM_PATH) throw new Error(MISSING);
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: ARGS, timeout: 60_000 });
  return {
    browser,
    newContext: () => browser.newContext(),
    close: () => browser.close(),
  };
}

/**
 * `describe` for tests that need Chromium. Without it: on CI (`CI=true`) the suite FAILS with the
 * reason, so a browser test can never vanish from a run; locally it is skipped and says why.
 */
export function describeBrowser(name: string, body: () => void): void {
  if (CHROMIUM_PATH) {
    describe(name, body);
    return;
  }
  if (process.env.CI === 'true' || process.env.CI === '1') {
    describe(name, () => {
      it('needs Chromium', () => {
        throw new Error(`${MISSING}. CI must run the browser tests.`);
      });
    });
    return;
  }
  // stderr, so the reason shows in every reporter's output.
  process.stderr.write(`[skipped] ${name}: ${MISSING}.\n`);
  describe.skip(name, body);
}
