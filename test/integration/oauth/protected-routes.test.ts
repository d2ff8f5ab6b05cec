import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueOperatorTokens } from '../../../src/oauth/cli.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

describe('the scope-protected example routes with either credential', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    atrium = await startTestAtrium();
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('answers an API-key caller with its user, its role scopes and no expiry', async () => {
    const caller = await atrium.caller({ role: 'member' });
    const profile = await atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: caller.headers,
    });
    expect(profile.statusCode).toBe(200);
    expect(profile.json()).toEqual({
      user_id: caller.userId,
      scopes: expect.arrayContaining(['profile:read', 'data:export']),
      token_expires: null,
    });
    const exported = await atrium.http!.inject({
      method: 'POST',
      url: '/api/data/export',
      headers: caller.headers,
    });
    expect(exported.statusCode).toBe(202);
    expect(exported.json()).toEqual({ status: 'accepted', requested_by: caller.userId, client_id: null });
  });

  it('refuses a viewer key the export scope with 403 naming it, and no credentials with 401', async () => {
    const viewer = await atrium.caller({ role: 'viewer' });
    const res = await atrium.http!.inject({
      method: 'POST',
      url: '/api/data/export',
      headers: viewer.headers,
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().message).toContain('data:export');
    expect(res.headers['www-authenticate']).toBeUndefined();
    const anonymous = await atrium.http!.inject({ method: 'GET', url: '/api/user/profile' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe('Bearer');
  });

  it('answers a bearer caller with the token’s scopes, expiry and client', async () => {
    const caller = await atrium.caller({ role: 'member' });
    const tokens = await issueOperatorTokens(atrium.services, {
      userId: caller.userId,
      scopes: 'profile:read data:export',
    });
    const headers = { authorization: `Bearer ${tokens.access_token}` };
    const profile = await atrium.http!.inject({ method: 'GET', url: '/api/user/profile', headers });
    expect(profile.statusCode).toBe(200);
    const body = profile.json();
    expect(body.user_id).toBe(caller.userId);
    expect(body.scopes).toEqual(['data:export', 'profile:read']);
    const ttl = Date.parse(body.token_expires) - Date.now();
    expect(ttl).toBeGreaterThan(890_000);
    expect(ttl).toBeLessThanOrEqual(900_000);
    const exported = await atrium.http!.inject({ method: 'POST', url: '/api/data/export', headers });
    expect(exported.json()).toEqual({
      status: 'accepted',
      requested_by: caller.userId,
      client_id: tokens.client_id,
    });
  });

  it('prefers the API key when both credentials are sent', async () => {
    const caller = await atrium.caller();
    const res = await atrium.http!.inject({
      method: 'GET',
      url: '/api/user/profile',
      headers: { ...caller.headers, authorization: 'Bearer not.a.token' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().token_expires).toBeNull();
  });
});
