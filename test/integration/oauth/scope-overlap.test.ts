import * as oauth from 'oauth4webapi';
import { beforeAll, describe, expect, it } from 'vitest';
import { ALL_SCOPES } from '../../../src/auth/scopes.js';
import {
  cookieFrom,
  discover,
  form,
  hiddenFields,
  insecure,
  oauthServerForSuite,
  REDIRECT,
  userWithPassword,
} from './support.js';

/**
 * docs/oauth.md: "a token carries the overlap of request, client and role; a request with no
 * overlap is invalid_scope". What Swagger UI's "select all" sends with a client registered for
 * fewer scopes, through an independent client library over a real socket.
 */
describe('a new grant carries the overlap of the requested scopes, the client and the role', () => {
  const server = oauthServerForSuite();
  let as: oauth.AuthorizationServer;

  beforeAll(async () => {
    as = await discover(server);
  });

  /** A ResponseBodyError's error code, or rethrows anything else. */
  async function oauthError(promise: Promise<unknown>): Promise<{ error: string; description?: string }> {
    try {
      await promise;
    } catch (err) {
      if (err instanceof oauth.ResponseBodyError)
        return { error: err.error, description: err.error_description };
      throw err;
    }
    throw new Error('expected an OAuth error response');
  }

  it('client credentials: issues the requested scopes the client is registered for, and says so', async () => {
    const created = await server.atrium.services.oauth.clients.create({
      name: 'Reporting job',
      scopes: 'profile:read orders:read',
    });
    const client = { client_id: created.client_id };
    const auth = oauth.ClientSecretBasic(created.client_secret!);
    const grant = (scope: string) =>
      oauth
        .clientCredentialsGrantRequest(as, client, auth, { scope }, insecure)
        .then((response) => oauth.processClientCredentialsResponse(as, client, response));

    const all = await grant(ALL_SCOPES.join(' '));
    expect(all.scope).toBe('orders:read profile:read');
    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${all.access_token}` },
    });
    expect(await profile.json()).toMatchObject({ scopes: ['orders:read', 'profile:read'] });

    expect((await grant('orders:write profile:read')).scope).toBe('profile:read');
    // Nothing left, or a scope that does not exist: refused.
    expect(await oauthError(grant('orders:write users:write'))).toMatchObject({ error: 'invalid_scope' });
    expect(await oauthError(grant('profile:read superuser'))).toMatchObject({ error: 'invalid_scope' });
  });

  /** The browser part: open the authorization URL, sign in, return where the server redirects. */
  async function authorize(
    clientId: string,
    scope: string,
    challenge: string,
    user: { handle: string; password: string },
  ): Promise<string> {
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      scope,
      state: 'st',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    const page = await fetch(url, { redirect: 'manual' });
    if (page.status === 302) return page.headers.get('location')!;
    expect(page.status).toBe(200);
    const posted = await fetch(`${server.url}/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: cookieFrom(page.headers.get('set-cookie'))!,
        origin: server.url,
      },
      body: form({ ...hiddenFields(await page.text()), username: user.handle, password: user.password }),
    });
    expect(posted.status).toBe(302);
    return posted.headers.get('location')!;
  }

  it('code with PKCE: "select all" with a client registered for fewer scopes gets its scopes, narrowed by role', async () => {
    // As the seeded single-page app: public, first party, five scopes.
    const spa = await server.atrium.services.oauth.clients.create({
      name: 'SPA',
      redirectUris: [REDIRECT],
      public: true,
      firstParty: true,
      scopes: 'profile:read users:read content:read content:write orders:read',
    });
    const client = { client_id: spa.client_id };
    const exchange = async (user: { handle: string; password: string }, scope: string) => {
      const verifier = oauth.generateRandomCodeVerifier();
      const location = await authorize(
        spa.client_id,
        scope,
        await oauth.calculatePKCECodeChallenge(verifier),
        user,
      );
      const params = oauth.validateAuthResponse(as, client, new URL(location), 'st');
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client,
        oauth.None(),
        params,
        REDIRECT,
        verifier,
        insecure,
      );
      return oauth.processAuthorizationCodeResponse(as, client, response);
    };

    const member = await userWithPassword(server.atrium);
    const tokens = await exchange(member, ALL_SCOPES.join(' '));
    const spaScopes = ['profile:read', 'users:read', 'content:read', 'content:write', 'orders:read'];
    // In the order asked, which is ALL_SCOPES' order.
    expect(tokens.scope).toBe(ALL_SCOPES.filter((s) => spaScopes.includes(s)).join(' '));
    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(((await profile.json()) as { scopes: string[] }).scopes.sort()).toEqual(spaScopes.sort());

    // A viewer may grant the read scopes only: the overlap of request, client and role.
    const viewer = await userWithPassword(server.atrium, { role: 'viewer' });
    const read = await exchange(viewer, 'orders:read orders:write content:write profile:read');
    expect(read.scope).toBe('orders:read profile:read');
  });

  it('code with PKCE: no overlap is invalid_scope, its description with %20 for spaces', async () => {
    const narrow = await server.atrium.services.oauth.clients.create({
      name: 'Narrow',
      redirectUris: [REDIRECT],
      public: true,
      firstParty: true,
      scopes: 'profile:read',
    });
    const user = await userWithPassword(server.atrium);
    const challenge = await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier());
    const location = await authorize(narrow.client_id, 'orders:write users:write', challenge, user);
    const query = new URL(location).search;
    expect(query).not.toContain('+');
    expect(query).toContain('error_description=None%20of%20the%20requested%20scopes');
    const params = new URL(location).searchParams;
    expect(params.get('error')).toBe('invalid_scope');
    expect(params.get('error_description')).toBe(
      'None of the requested scopes is allowed for this client: orders:write users:write.',
    );
    expect(params.get('state')).toBe('st');
    expect(() =>
      oauth.validateAuthResponse(as, { client_id: narrow.client_id }, new URL(location), 'st'),
    ).toThrow(oauth.AuthorizationResponseError);
  });
});
