import * as oauth from 'oauth4webapi';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, discover, form, insecure, oauthServerForSuite } from './support.js';

describe('client credentials through an independent OAuth client', () => {
  const server = oauthServerForSuite();
  let as: oauth.AuthorizationServer;
  let client: { client_id: string; client_secret: string };

  beforeAll(async () => {
    as = await discover(server);
    const created = await server.atrium.services.oauth.clients.create({
      name: 'Reporting job',
      scopes: 'profile:read data:export orders:read',
    });
    client = { client_id: created.client_id, client_secret: created.client_secret! };
  });

  it('discovers the RFC 8414 metadata', () => {
    expect(as.issuer).toBe(server.url);
    expect(as.token_endpoint).toBe(`${server.url}/oauth/token`);
    expect(as.authorization_endpoint).toBe(`${server.url}/authorize`);
    expect(as.jwks_uri).toBe(`${server.url}/.well-known/jwks.json`);
    expect(as.introspection_endpoint).toBe(`${server.url}/oauth/introspect`);
    expect(as.code_challenge_methods_supported).toEqual(['S256']);
    expect(as.grant_types_supported).not.toContain('password');
    expect(as.grant_types_supported).not.toContain('implicit');
    expect(as.response_types_supported).toEqual(['code']);
  });

  it('issues an RS256 access token that verifies against the published JWKS and opens the API', async () => {
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      { client_id: client.client_id },
      oauth.ClientSecretBasic(client.client_secret),
      { scope: 'profile:read data:export' },
      insecure,
    );
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('pragma')).toBe('no-cache');
    const tokens = await oauth.processClientCredentialsResponse(
      as,
      { client_id: client.client_id },
      response,
    );
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.expires_in).toBe(900);
    expect(tokens.scope).toBe('profile:read data:export');
    expect(tokens.refresh_token).toBeUndefined();

    const claims = await oauth.validateJwtAccessToken(
      as,
      new Request(`${server.url}/api/user/profile`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      }),
      server.url,
      { ...insecure, signingAlgorithms: ['RS256'] },
    );
    expect(claims.sub).toBe(client.client_id);
    expect(claims.client_id).toBe(client.client_id);
    expect(claims.exp - claims.iat).toBe(900);
    expect(claims.type).toBe('access');
    expect(claims.scope).toBe('profile:read data:export');

    const profile = await fetch(`${server.url}/api/user/profile`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(profile.status).toBe(200);
    const body = await profile.json();
    expect(body).toEqual({
      user_id: client.client_id,
      scopes: ['data:export', 'profile:read'],
      token_expires: new Date(claims.exp * 1000).toISOString(),
    });

    const exported = await fetch(`${server.url}/api/data/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(exported.status).toBe(202);
    expect(await exported.json()).toEqual({
      status: 'accepted',
      requested_by: client.client_id,
      client_id: client.client_id,
    });
  });

  it('grants every allowed scope when none is asked for, and answers 403 naming a missing scope', async () => {
    const res = await inject(basic(client.client_id, client.client_secret), {
      grant_type: 'client_credentials',
    });
    expect(res.statusCode).toBe(200);
    const token = res.json();
    expect(token.scope.split(' ').sort()).toEqual(['data:export', 'orders:read', 'profile:read']);

    const narrow = await inject(basic(client.client_id, client.client_secret), {
      grant_type: 'client_credentials',
      scope: 'orders:read',
    });
    const denied = await server.atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { authorization: `Bearer ${narrow.json().access_token}` },
    });
    expect(denied.statusCode).toBe(403);
    expect(denied.body).toContain('profile:read');
    expect(denied.headers['www-authenticate']).toBe(
      'Bearer error="insufficient_scope", scope="profile:read"',
    );
  });

  it("refuses a request with none of the client's scopes, or a scope that does not exist", async () => {
    for (const scope of ['users:write', 'users:write orders:write', 'profile:read admin']) {
      const res = await inject(basic(client.client_id, client.client_secret), {
        grant_type: 'client_credentials',
        scope,
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_scope');
    }
  });

  it('URL-decodes the Basic credentials (RFC 6749 §2.3.1)', async () => {
    const percent = (s: string) =>
      [...s].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
    const header = `Basic ${Buffer.from(`${percent(client.client_id)}:${percent(client.client_secret)}`).toString('base64')}`;
    const res = await inject(header, { grant_type: 'client_credentials', scope: 'profile:read' });
    expect(res.statusCode).toBe(200);
  });

  it('documents in /openapi.json the 401 texts /oauth/token really answers', async () => {
    const post = (authorization: string | undefined) =>
      fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(authorization ? { authorization } : {}),
        },
        body: form({ grant_type: 'client_credentials' }),
      });
    const failed = (await (await post(basic(client.client_id, 'acs_wrong'))).json()) as Record<
      string,
      string
    >;
    const missing = (await (await post(undefined)).json()) as Record<string, string>;
    expect(missing.error_description).not.toBe(failed.error_description);

    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    };
    const text = document.paths['/oauth/token']!.post!.responses['401']!.description;
    // Each answer is quoted with the cases that get it; the doc once said "one answer for all".
    expect(text).toContain(failed.error_description);
    expect(text).toContain(missing.error_description);
  });

  it('answers a wrong secret and an unknown client with the same 401 invalid_client', async () => {
    const wrong = await inject(basic(client.client_id, 'acs_wrong'), { grant_type: 'client_credentials' });
    const unknown = await inject(basic('cli_01nosuchclient0000000000', 'whatever'), {
      grant_type: 'client_credentials',
    });
    const garbage = await inject('Basic !!!notbase64', { grant_type: 'client_credentials' });
    const none = await inject(undefined, { grant_type: 'client_credentials' });
    for (const res of [wrong, unknown, garbage, none]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm="atrium"/);
      expect(res.headers['cache-control']).toBe('no-store');
    }
    expect(wrong.json()).toEqual(unknown.json());
  });

  it('refuses client_secret_post, public clients and mixed authentication', async () => {
    const post = await inject(undefined, {
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    expect(post.statusCode).toBe(401);
    expect(post.json().error).toBe('invalid_client');

    const pub = await server.atrium.services.oauth.clients.create({
      name: 'SPA',
      public: true,
      redirectUris: ['https://spa.example.com/cb'],
    });
    const publicClient = await inject(undefined, {
      grant_type: 'client_credentials',
      client_id: pub.client_id,
    });
    expect(publicClient.statusCode).toBe(400);
    expect(publicClient.json().error).toBe('unauthorized_client');

    const mismatch = await inject(basic(client.client_id, client.client_secret), {
      grant_type: 'client_credentials',
      client_id: pub.client_id,
    });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json().error).toBe('invalid_request');
  });

  it('refuses the password and implicit grants and unknown grant types with unsupported_grant_type', async () => {
    for (const grant of [
      'password',
      'implicit',
      'urn:ietf:params:oauth:grant-type:device_code',
      'toString',
      '__proto__',
    ]) {
      const res = await inject(basic(client.client_id, client.client_secret), {
        grant_type: grant,
        username: 'a',
        password: 'b',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('unsupported_grant_type');
    }
  });

  it('answers malformed requests with invalid_request, never a 500', async () => {
    const auth = basic(client.client_id, client.client_secret);
    const missing = await inject(auth, {});
    expect(missing.json().error).toBe('invalid_request');
    const repeated = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=client_credentials&scope=profile:read&scope=data:export',
    });
    expect(repeated.statusCode).toBe(400);
    expect(repeated.json().error).toBe('invalid_request');
    const json = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { authorization: auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    expect(json.statusCode).toBe(400);
    expect(json.json().error).toBe('invalid_request');
    const huge = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
      payload: `grant_type=client_credentials&scope=${'a'.repeat(40_000)}`,
    });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().error).toBe('invalid_request');
  });

  function inject(authorization: string | undefined, values: Record<string, string>) {
    return server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(authorization ? { authorization } : {}),
      },
      payload: form(values),
    });
  }
});
