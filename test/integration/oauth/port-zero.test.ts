import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { runCli } from '../../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { serve, type Served } from '../../helpers/serve.js';
import {
  cookieFrom,
  firstPartyApp,
  form,
  hiddenFields,
  insecure,
  pkce,
  REDIRECT,
  userWithPassword,
  clientCredentialsTokens,
} from './support.js';

/**
 * PORT=0 (the system picks the port) with PUBLIC_URL and AUTH_URL left to their default: the
 * service advertised http://127.0.0.1:0 as its issuer and API address, and a client following
 * discovery failed. Each part is checked by what a client does with it, over real sockets.
 */
describe('PORT=0 without PUBLIC_URL', () => {
  const discover = async (url: string) => {
    const issuer = new URL(url);
    return oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
    );
  };

  describe('atrium serve', () => {
    let dir: string;
    let db: TestDatabase;
    let served: Served;
    let client: { client_id: string; client_secret: string };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'atrium-port-zero-'));
      db = await freshDatabase();
      // Two processes share the database: a file, not the in-memory SQLite of one process.
      const DATABASE_URL = db.dialect === 'sqlite' ? `sqlite:${join(dir, 'atrium.db')}` : db.url;
      const created = await runCli(
        ['clients', 'create', '--name', 'Reporting job', '--scopes', 'profile:read'],
        { DATABASE_URL },
      );
      expect(created.code, created.stderr).toBe(0);
      client = JSON.parse(created.stdout) as typeof client;
      // serve() sets HOST=127.0.0.1 and PORT=0, and nothing else: no PUBLIC_URL, no AUTH_URL.
      served = await serve({ DATABASE_URL }, { roles: 'api,auth' });
      // A CLI process makes the client, then `atrium serve` starts: seconds each on a loaded machine.
    }, 90_000);
    afterAll(async () => {
      await served?.stop();
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('listens on a port the system picked and advertises that address as its issuer', async () => {
      expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(served.url).not.toMatch(/:0$/);
      // oauth4webapi refuses metadata whose issuer is not the address it was fetched from.
      const as = await discover(served.url!);
      expect(as.issuer).toBe(served.url);
      expect(as.token_endpoint).toBe(`${served.url}/oauth/token`);
      expect(as.jwks_uri).toBe(`${served.url}/.well-known/jwks.json`);
    });

    it('issues tokens whose iss and aud are that address, which it accepts back', async () => {
      const as = await discover(served.url!);
      const tokens = await clientCredentialsTokens(as, client);
      const profileUrl = `${served.url}/api/user/profile`;
      const bearer = { authorization: `Bearer ${tokens.access_token}` };
      // Signature from the discovered JWKS, iss against the discovered issuer, aud the API's address.
      const claims = await oauth.validateJwtAccessToken(
        as,
        new Request(profileUrl, { headers: bearer }),
        served.url!,
        { ...insecure, signingAlgorithms: ['RS256'] },
      );
      expect(claims.iss).toBe(served.url);
      const profile = await fetch(profileUrl, { headers: bearer });
      expect(profile.status, await profile.clone().text()).toBe(200);
      expect(((await profile.json()) as { user_id: string }).user_id).toBe(client.client_id);
    });

    it('names that address in the OpenAPI document, for the API and the token server', async () => {
      const res = await fetch(`${served.url}/openapi.json`);
      expect(res.status).toBe(200);
      const doc = (await res.json()) as {
        servers: Array<{ url: string }>;
        components: { securitySchemes: Record<string, { flows?: Record<string, { tokenUrl?: string }> }> };
      };
      expect(doc.servers.map((s) => s.url)).toContain(served.url);
      const tokenUrls = Object.values(doc.components.securitySchemes).flatMap((s) =>
        Object.values(s.flows ?? {}).map((f) => f.tokenUrl),
      );
      expect(tokenUrls.length).toBeGreaterThan(0);
      for (const url of tokenUrls) expect(url).toBe(`${served.url}/oauth/token`);
    });
  });

  describe('the sign-in page, in a process that listens (createAtrium)', () => {
    let atrium: TestAtrium;
    let url: string;

    beforeAll(async () => {
      // startTestAtrium's PORT is 0 (unless TEST_PORTS names a range); HOST and the URLs unset.
      atrium = await startTestAtrium({ PORT: '0' });
      url = (await atrium.listen()).httpUrl!;
    });
    afterAll(() => atrium?.stop());

    it('accepts its own login form and sends the code back with the issuer clients discovered', async () => {
      expect(url).not.toMatch(/:0$/);
      const app = await firstPartyApp({ atrium, url, stop: async () => undefined }, REDIRECT);
      const user = await userWithPassword(atrium);
      const { verifier, challenge } = pkce();
      const query = form({
        response_type: 'code',
        client_id: app.client_id,
        redirect_uri: app.redirect_uri,
        scope: 'profile:read',
        state: 'xyz',
        code_challenge: challenge,
        code_challenge_method: 'S256',
      });
      const page = await fetch(`${url}/authorize?${query}`);
      expect(page.status).toBe(200);
      const cookie = cookieFrom(page.headers.get('set-cookie'));
      // As a browser posts the page it was shown: from this server's origin, same-origin.
      const posted = await fetch(`${url}/authorize`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: url,
          'sec-fetch-site': 'same-origin',
          ...(cookie ? { cookie } : {}),
        },
        body: form({ ...hiddenFields(await page.text()), username: user.handle, password: user.password }),
      });
      expect(posted.status).toBe(302);
      const callback = new URL(posted.headers.get('location')!);
      expect(callback.origin + callback.pathname).toBe(REDIRECT);
      const as = await discover(url);
      const clientData = { client_id: app.client_id };
      const params = oauth.validateAuthResponse(as, clientData, callback, 'xyz');
      const tokens = await oauth.processAuthorizationCodeResponse(
        as,
        clientData,
        await oauth.authorizationCodeGrantRequest(
          as,
          clientData,
          oauth.ClientSecretBasic(app.client_secret),
          params,
          app.redirect_uri,
          verifier,
          insecure,
        ),
      );
      const claims = await oauth.validateJwtAccessToken(
        as,
        new Request(`${url}/api/user/profile`, {
          headers: { authorization: `Bearer ${tokens.access_token}` },
        }),
        url,
        { ...insecure, signingAlgorithms: ['RS256'] },
      );
      expect(claims.sub).toBe(user.id);
    });
  });
});
