import * as oauth from 'oauth4webapi';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, codeFlowSuite, codeFlowTokens, form, insecure, REDIRECT } from './support.js';

describe('token introspection (RFC 7662)', () => {
  const { server, flow } = codeFlowSuite();
  let resourceServer: { client_id: string; client_secret: string };

  beforeAll(async () => {
    const clients = server.atrium.services.oauth.clients;
    const rs = await clients.create({ name: 'Resource server', scopes: 'profile:read' });
    resourceServer = { client_id: rs.client_id, client_secret: rs.client_secret! };
  });

  const introspect = (
    token: string | undefined,
    authorization?: string,
    extra: Record<string, string> = {},
  ) =>
    server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(authorization ? { authorization } : {}),
      },
      payload: form({ token, ...extra }),
    });
  const rsAuth = () => basic(resourceServer.client_id, resourceServer.client_secret);

  it('describes an active token to oauth4webapi', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const rs = { client_id: resourceServer.client_id };
    const response = await oauth.introspectionRequest(
      flow.as,
      rs,
      oauth.ClientSecretBasic(resourceServer.client_secret),
      tokens.access_token,
      { ...insecure, additionalParameters: { token_type_hint: 'access_token' } },
    );
    expect(response.headers.get('cache-control')).toBe('no-store');
    const result = await oauth.processIntrospectionResponse(flow.as, rs, response);
    expect(result).toMatchObject({
      active: true,
      scope: 'profile:read data:export',
      sub: flow.user.id,
      client_id: flow.app.client_id,
      iss: server.url,
      aud: server.url,
      token_type: 'Bearer',
    });
    expect(result.exp! - result.iat!).toBe(900);
  });

  it('says only { active: false } for anything that is not an active access token', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const [head, payload] = tokens.access_token.split('.');
    const tampered = `${head}.${payload}x.${tokens.access_token.split('.')[2]}`;
    for (const token of [tokens.refresh_token, 'garbage', tampered, 'a.b.c', 'x'.repeat(20_000 / 2)]) {
      const res = await introspect(token, rsAuth());
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ active: false });
    }
  });

  it('reports a token inactive once its grant is revoked', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    expect((await introspect(tokens.access_token, rsAuth())).json().active).toBe(true);
    const next = await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token: tokens.refresh_token, client_id: flow.app.client_id },
    });
    expect(next.statusCode).toBe(200);
    // Reuse of the old refresh token revokes the family, and with it this access token.
    await server.atrium.http!.inject({
      method: 'POST',
      url: '/oauth/token/refresh',
      payload: { refresh_token: tokens.refresh_token, client_id: flow.app.client_id },
    });
    expect((await introspect(tokens.access_token, rsAuth())).json()).toEqual({ active: false });
  });

  it('requires client authentication: none, a public client or a wrong secret is 401 invalid_client', async () => {
    const tokens = await codeFlowTokens(server.atrium, flow.app, flow.user);
    const pub = await server.atrium.services.oauth.clients.create({
      name: 'SPA',
      public: true,
      redirectUris: [REDIRECT],
    });
    const cases = [
      await introspect(tokens.access_token),
      await introspect(tokens.access_token, undefined, { client_id: pub.client_id }),
      await introspect(tokens.access_token, basic(pub.client_id, '')),
      await introspect(tokens.access_token, basic(resourceServer.client_id, 'wrong')),
      await introspect(tokens.access_token, `Bearer ${tokens.access_token}`),
    ];
    for (const res of cases) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
      expect(res.headers['www-authenticate']).toMatch(/^Basic/);
      expect(res.body).not.toContain('active');
    }
  });

  it('answers a request without a token with 400 invalid_request', async () => {
    const res = await introspect(undefined, rsAuth());
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
  });
});
