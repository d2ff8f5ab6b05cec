import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { issueOperatorTokens } from '../../../src/oauth/cli.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call } from '../../helpers/rest-client.js';
import { makeCatalogue, orderBody } from '../orders/fixtures.js';

/**
 * A token carries the overlap of what was asked, what the client may have and what the user's role
 * allows (docs/oauth.md). The role is read on every request, so a user demoted to viewer loses the
 * write scopes of the tokens they already hold at once, as their API keys do, not when the token
 * expires.
 */
describe('a demoted user’s access tokens', () => {
  let atrium: TestAtrium;
  let base: string;
  beforeAll(async () => {
    atrium = await startTestAtrium({}, ['api', 'auth']);
    base = (await atrium.listen()).httpUrl!;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('lose the write scopes of the old role on every request and in introspection', async () => {
    const cat = await makeCatalogue(atrium);
    const member = await atrium.caller({ role: 'member' });
    const tokens = await issueOperatorTokens(atrium.services, {
      userId: member.userId,
      scopes: 'orders:read orders:write profile:read',
    });
    const bearer = { authorization: `Bearer ${tokens.access_token}` };
    const before = await call(base, 'POST', '/api/v2/orders', { headers: bearer, json: orderBody(cat) });
    expect(before.status, before.text).toBe(201);

    await atrium.services.core.users.update(SYSTEM_ACTOR, member.userId, { role: 'viewer' });

    const after = await call(base, 'POST', '/api/v2/orders', { headers: bearer, json: orderBody(cat) });
    expect(after.status, after.text).toBe(403);
    expect(after.body).toMatchObject({ error: 'insufficient_scope' });
    const withKey = await call(base, 'POST', '/api/v2/orders', {
      headers: member.headers,
      json: orderBody(cat),
    });
    expect(withKey.status).toBe(403);

    const profile = await call(base, 'GET', '/api/user/profile', { headers: bearer });
    expect(profile.status).toBe(200);
    expect((profile.body!.scopes as string[]).sort()).toEqual(['orders:read', 'profile:read']);
    expect((await call(base, 'GET', '/api/v2/orders', { headers: bearer })).status).toBe(200);

    const rs = await atrium.services.oauth.clients.create({
      name: 'Resource server',
      scopes: 'profile:read',
    });
    const introspected = await fetch(`${base}/oauth/introspect`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${rs.client_id}:${rs.client_secret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ token: tokens.access_token }),
    });
    expect(await introspected.json()).toMatchObject({ active: true, scope: 'orders:read profile:read' });

    // Promoted back, the token has what it was issued with again: the role narrows, never widens.
    await atrium.services.core.users.update(SYSTEM_ACTOR, member.userId, { role: 'member' });
    const again = await call(base, 'POST', '/api/v2/orders', { headers: bearer, json: orderBody(cat) });
    expect(again.status, again.text).toBe(201);
  });
});
