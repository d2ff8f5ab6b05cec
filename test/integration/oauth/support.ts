import { createHash, randomBytes } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { Clock } from '../../../src/domain/clock.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { forSuite } from '../../helpers/suite.js';

export interface OAuthTestServer {
  atrium: TestAtrium;
  /** The listening server's base URL, which is also AUTH_URL and PUBLIC_URL. */
  url: string;
  stop(): Promise<void>;
}

export { freePort } from '../../helpers/ports.js';

/** An Atrium listening on a real socket, its issuer equal to its address. */
export async function startOAuthServer(
  env: Record<string, string> = {},
  clock?: Clock,
): Promise<OAuthTestServer> {
  // The port is the service's to pick (PORT=0, D26): the issuer, discovery and the sign-in form then
  // name the address it listens on, as they would for a user starting it so.
  const atrium = await startTestAtrium({ HOST: '127.0.0.1', ...env }, undefined, clock ? { clock } : {});
  const url = (await atrium.listen()).httpUrl!;
  return { atrium, url, stop: () => atrium.stop() };
}

/** An OAuth server (startOAuthServer) for the enclosing describe block (see forSuite). */
export function oauthServerForSuite(env: Record<string, string> = {}, clock?: Clock): OAuthTestServer {
  return forSuite(
    () => startOAuthServer(env, clock),
    (server) => server.stop(),
  );
}

/** The test server speaks plain http, which oauth4webapi refuses unless told. */
export const insecure = { [oauth.allowInsecureRequests]: true };

/** The server's RFC 8414 metadata, read as an independent client library reads it. */
export async function discover(server: OAuthTestServer): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(server.url);
  return oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
  );
}

/** A client-credentials grant as oauth4webapi makes one (client_secret_basic), processed. */
export async function clientCredentialsTokens(
  as: oauth.AuthorizationServer,
  client: { client_id: string; client_secret: string },
  scope = 'profile:read',
): Promise<oauth.TokenEndpointResponse> {
  const id = { client_id: client.client_id };
  return oauth.processClientCredentialsResponse(
    as,
    id,
    await oauth.clientCredentialsGrantRequest(
      as,
      id,
      oauth.ClientSecretBasic(client.client_secret),
      { scope },
      insecure,
    ),
  );
}

/** The redirect URI the tests' apps register. */
export const REDIRECT = 'https://app.example.com/cb';

/** A confidential first-party client (no consent page) with one redirect URI. */
export async function firstPartyApp(
  server: OAuthTestServer,
  redirect: string,
): Promise<{ client_id: string; client_secret: string; redirect_uri: string }> {
  const c = await server.atrium.services.oauth.clients.create({
    name: 'App',
    redirectUris: [redirect],
    firstParty: true,
  });
  return { client_id: c.client_id, client_secret: c.client_secret!, redirect_uri: redirect };
}

export const HS256_ENV = {
  TOKEN_SIGNING: 'hs256',
  JWT_SECRET: 'test-secret-that-is-at-least-32-bytes-long!!',
};

export function basic(id: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64')}`;
}

export function form(values: Record<string, string | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) p.append(k, v);
  return p.toString();
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

let counter = 0;

/** A user with a password, for the login page. */
export async function userWithPassword(
  atrium: TestAtrium,
  options: { role?: 'admin' | 'member' | 'viewer'; password?: string } = {},
): Promise<{ id: string; handle: string; password: string }> {
  counter += 1;
  const handle = `oauth${process.pid}x${counter}${randomBytes(2).toString('hex')}`;
  const password = options.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const user = await atrium.services.core.users.create({
    handle,
    email: `${handle}@example.com`,
    name: 'OAuth Tester',
    role: options.role ?? 'member',
    password,
  });
  return { id: user.id, handle, password };
}

/** Hidden inputs of a rendered form, as a browser would submit them. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]!] = m[2]!
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  }
  return out;
}

export function cookieFrom(setCookie: string | string[] | null | undefined): string | undefined {
  const first = Array.isArray(setCookie) ? setCookie[0] : setCookie;
  return first?.split(';')[0];
}

/**
 * The browser part of the code flow through `inject`: GET /authorize, then post the login form
 * (hidden fields, CSRF cookie, credentials, consent). Returns the final response.
 */
export async function authorizeThroughForm(
  atrium: TestAtrium,
  query: Record<string, string | undefined>,
  login: { username: string; password: string; consent?: string },
) {
  const page = await atrium.http!.inject({ method: 'GET', url: `/authorize?${form(query)}` });
  if (page.statusCode !== 200) return page;
  const cookie = cookieFrom(page.headers['set-cookie'] as string | string[] | undefined);
  return atrium.http!.inject({
    method: 'POST',
    url: '/authorize',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    payload: form({
      ...hiddenFields(page.body),
      username: login.username,
      password: login.password,
      consent: login.consent,
    }),
  });
}

/** Runs the code flow and exchanges the code; returns the token response. */
export async function codeFlowTokens(
  atrium: TestAtrium,
  client: { client_id: string; client_secret: string | null; redirect_uri: string },
  user: { handle: string; password: string },
  scope = 'profile:read data:export',
): Promise<{ access_token: string; refresh_token: string; scope: string; expires_in: number }> {
  const { verifier, challenge } = pkce();
  const res = await authorizeThroughForm(
    atrium,
    {
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: client.redirect_uri,
      scope,
      state: 'xyz',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    },
    { username: user.handle, password: user.password, consent: 'approve' },
  );
  if (res.statusCode !== 302) throw new Error(`authorize answered ${res.statusCode}: ${res.body}`);
  const code = new URL(res.headers.location as string).searchParams.get('code')!;
  const token = await atrium.http!.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(client.client_secret ? { authorization: basic(client.client_id, client.client_secret) } : {}),
    },
    payload: form({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirect_uri,
      code_verifier: verifier,
      client_id: client.client_secret ? undefined : client.client_id,
    }),
  });
  if (token.statusCode !== 200) throw new Error(`token answered ${token.statusCode}: ${token.body}`);
  return token.json();
}

export type App = Awaited<ReturnType<typeof firstPartyApp>>;
export type PasswordUser = Awaited<ReturnType<typeof userWithPassword>>;

export interface CodeFlowParties {
  /** The server's metadata, as oauth4webapi discovers it. */
  as: oauth.AuthorizationServer;
  /** A first-party app redirecting to REDIRECT. */
  app: App;
  user: PasswordUser;
}

/** The parties of the code flow on `server`, made once for the enclosing describe block (see forSuite). */
export function codeFlowParties(server: OAuthTestServer): CodeFlowParties {
  return forSuite(async () => ({
    as: await discover(server),
    app: await firstPartyApp(server, REDIRECT),
    user: await userWithPassword(server.atrium),
  }));
}

/**
 * The claims of an access token as the server issues it to the code flow's app for its user:
 * profile:read, 15 minutes from now, a fresh jti. `extra` replaces or adds claims.
 */
export function accessClaims(
  server: OAuthTestServer,
  flow: CodeFlowParties,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: server.url,
    aud: server.url,
    sub: flow.user.id,
    client_id: flow.app.client_id,
    scope: 'profile:read',
    type: 'access',
    iat: now,
    exp: now + 900,
    jti: `jti-${Math.random()}`,
    ...extra,
  };
}

/** An OAuth server for the enclosing describe block and the parties of the code flow on it. */
export function codeFlowSuite(
  env: Record<string, string> = {},
  clock?: Clock,
): { server: OAuthTestServer; flow: CodeFlowParties } {
  const server = oauthServerForSuite(env, clock);
  return { server, flow: codeFlowParties(server) };
}

/** The query of an authorization request for profile:read to REDIRECT, with a PKCE challenge. */
export function authorizeQuery(
  clientId: string,
  challenge: string,
  overrides: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  return {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'profile:read',
    state: 's',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...overrides,
  };
}
