import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { comparable, MALFORMED_KEY, unknownKey } from '../../helpers/credentials.js';
import { testDialect } from '../../helpers/database.js';

type Caller = Awaited<ReturnType<TestAtrium['caller']>>;

/** What a repeated REST user read answers: PostgreSQL without Redis keeps no user cache (docs/rest.md). */
const HIT = testDialect() === 'sqlite' ? 'HIT' : 'MISS';

describe('User REST API', () => {
  let atrium: TestAtrium;
  let admin: Caller;
  let member: Caller;
  let other: Caller;
  let viewer: Caller;

  const get = (url: string, headers: Record<string, string> = {}) =>
    atrium.http!.inject({ method: 'GET', url, headers });
  const patch = (url: string, headers: Record<string, string>, payload: unknown) =>
    atrium.http!.inject({ method: 'PATCH', url, headers, payload: payload as object });
  const raw = (method: 'PATCH' | 'POST', url: string, headers: Record<string, string>, payload: string) =>
    atrium.http!.inject({
      method,
      url,
      headers: { ...headers, 'content-type': 'application/json' },
      payload,
    });

  beforeAll(async () => {
    atrium = await startTestAtrium();
    admin = await atrium.caller({ role: 'admin' });
    member = await atrium.caller({ role: 'member' });
    other = await atrium.caller({ role: 'member' });
    viewer = await atrium.caller({ role: 'viewer' });
  });
  afterAll(async () => {
    await atrium.stop();
  });

  describe('GET /v1/users/{user_id}', () => {
    it('returns the user resource with HAL links and the cache headers', async () => {
      const res = await get(`/v1/users/${member.userId}`, member.headers);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['cache-control']).toBe('max-age=60, stale-while-revalidate=300');
      // The first read of this user in the file: nothing has cached it yet.
      expect(res.headers['x-cache']).toBe('MISS');
      const user = await atrium.services.core.users.get(member.userId);
      expect(res.json()).toEqual({
        id: member.userId,
        name: user.name,
        email: user.email,
        role: 'member',
        created_at: user.createdAt,
        organization_id: user.organizationId,
        _links: {
          self: { href: `/v1/users/${member.userId}` },
          organization: { href: `/v1/organizations/${user.organizationId}` },
          orders: { href: `/v1/users/${member.userId}/orders` },
        },
      });
      expect(Number.isNaN(Date.parse(res.json().created_at))).toBe(false);
    });

    it('misses the cache first and hits it after, with the same body', async () => {
      const fresh = await atrium.caller();
      const first = await get(`/v1/users/${fresh.userId}`, fresh.headers);
      const second = await get(`/v1/users/${fresh.userId}`, fresh.headers);
      expect(first.headers['x-cache']).toBe('MISS');
      expect(second.headers['x-cache']).toBe(HIT);
      expect(second.json()).toEqual(first.json());
      expect(second.headers['content-type']).toBe(first.headers['content-type']);
    });

    it('varies on the credentials so shared caches never mix callers', async () => {
      const res = await get(`/v1/users/${member.userId}`, member.headers);
      const vary = String(res.headers.vary).toLowerCase();
      expect(vary).toContain('x-api-key');
      expect(vary).toContain('authorization');
    });

    it('lets an admin read anyone, and refuses other members and viewers with FORBIDDEN', async () => {
      expect((await get(`/v1/users/${member.userId}`, admin.headers)).statusCode).toBe(200);
      for (const caller of [other, viewer]) {
        const res = await get(`/v1/users/${member.userId}`, caller.headers);
        expect(res.statusCode).toBe(403);
        expect(res.json()).toMatchObject({ error: 'FORBIDDEN', details: [] });
        expect(res.headers['x-cache']).toBeUndefined();
      }
    });

    it('answers a missing user with 404 NOT_FOUND in the spec body, for admins and members alike', async () => {
      for (const caller of [admin, member]) {
        const res = await get('/v1/users/usr_doesnotexist0000000000000', caller.headers);
        expect(res.statusCode).toBe(404);
        const body = res.json();
        expect(body).toEqual({
          error: 'NOT_FOUND',
          message: expect.any(String),
          request_id: res.headers['x-request-id'],
          details: [],
        });
      }
    });

    it('answers 404 for an id that cannot be a user id, without repeating it (as gRPC and GraphQL do)', async () => {
      const res = await get(`/v1/users/usr_${'x'.repeat(150)}`, admin.headers);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: 'NOT_FOUND', message: 'User not found.' });
    });

    it('refuses unknown, revoked and malformed keys with one identical 401 invalid_api_key body', async () => {
      const revoked = await atrium.caller();
      await atrium.services.apiKeys.revoke(revoked.keyId);
      const keys = [await unknownKey(atrium), revoked.key, MALFORMED_KEY, 'not-a-key', 'x'.repeat(5000)];
      const bodies = [];
      for (const key of keys) {
        const res = await get(`/v1/users/${member.userId}`, { 'x-api-key': key });
        expect(res.statusCode).toBe(401);
        expect(res.headers['x-ratelimit-limit']).toBeUndefined();
        bodies.push(res.json());
      }
      expect(bodies[0]).toMatchObject({ error: 'invalid_api_key', details: [] });
      for (const body of bodies) expect(comparable(body)).toEqual(comparable(bodies[0]));
      expect(JSON.stringify(bodies)).not.toContain(revoked.key);
    });

    it('requires credentials', async () => {
      const res = await get(`/v1/users/${member.userId}`);
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
    });

    it('serves a change made through another surface at once (the cache is invalidated on change)', async () => {
      const fresh = await atrium.caller();
      await get(`/v1/users/${fresh.userId}`, fresh.headers);
      expect((await get(`/v1/users/${fresh.userId}`, fresh.headers)).headers['x-cache']).toBe(HIT);
      // The core's update is what GraphQL and gRPC call; it announces the change on the bus.
      await atrium.services.core.users.updateSelfService(SYSTEM_ACTOR, fresh.userId, {
        name: 'Changed Elsewhere',
      });
      const after = await get(`/v1/users/${fresh.userId}`, fresh.headers);
      expect(after.headers['x-cache']).toBe('MISS');
      expect(after.json().name).toBe('Changed Elsewhere');
    });

    it("answers 404 for a deleted user, even when cached, and refuses the deleted user's key", async () => {
      const doomed = await atrium.caller();
      await get(`/v1/users/${doomed.userId}`, doomed.headers);
      expect((await get(`/v1/users/${doomed.userId}`, admin.headers)).headers['x-cache']).toBe(HIT);
      await atrium.services.core.users.delete(SYSTEM_ACTOR, doomed.userId);
      const res = await get(`/v1/users/${doomed.userId}`, admin.headers);
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toBe('NOT_FOUND');
      const own = await get(`/v1/users/${doomed.userId}`, doomed.headers);
      expect(own.statusCode).toBe(401);
      expect(own.json().error).toBe('invalid_api_key');
      expect((await patch(`/v1/users/${doomed.userId}`, admin.headers, { name: 'Ghost' })).statusCode).toBe(
        404,
      );
    });
  });

  describe('PATCH /v1/users/{user_id}', () => {
    it('lets an admin change name, email and role, answering the updated user', async () => {
      const target = await atrium.caller();
      const res = await patch(`/v1/users/${target.userId}`, admin.headers, {
        name: 'Ada Lovelace',
        email: 'Ada.Lovelace@Example.com',
        role: 'viewer',
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        id: target.userId,
        name: 'Ada Lovelace',
        email: 'ada.lovelace@example.com',
        role: 'viewer',
        _links: { self: { href: `/v1/users/${target.userId}` } },
      });
      const stored = await atrium.services.core.users.get(target.userId);
      expect(stored).toMatchObject({ name: 'Ada Lovelace', role: 'viewer' });
    });

    it('invalidates the cached copy: MISS after PATCH, then HIT again', async () => {
      const target = await atrium.caller();
      await get(`/v1/users/${target.userId}`, admin.headers);
      expect((await get(`/v1/users/${target.userId}`, admin.headers)).headers['x-cache']).toBe(HIT);
      await patch(`/v1/users/${target.userId}`, admin.headers, { name: 'New Name' });
      const after = await get(`/v1/users/${target.userId}`, admin.headers);
      expect(after.headers['x-cache']).toBe('MISS');
      expect(after.json().name).toBe('New Name');
      expect((await get(`/v1/users/${target.userId}`, admin.headers)).headers['x-cache']).toBe(HIT);
    });

    it('accepts an empty body and boundary names (1 and 100 characters)', async () => {
      const target = await atrium.caller();
      expect((await patch(`/v1/users/${target.userId}`, admin.headers, {})).statusCode).toBe(200);
      for (const name of ['A', 'n'.repeat(100), 'Zoë 数据'.padEnd(100, 'é')]) {
        const res = await patch(`/v1/users/${target.userId}`, admin.headers, { name });
        expect(res.statusCode).toBe(200);
        expect(res.json().name).toBe(name);
      }
    });

    it('is admin-only: members and viewers get 403 even for themselves, before the body is read', async () => {
      // A member's key carries users:write, so the role rule refuses it; a viewer's key lacks the scope.
      for (const [caller, target, error] of [
        [member, member.userId, 'FORBIDDEN'],
        [member, other.userId, 'FORBIDDEN'],
        [viewer, viewer.userId, 'insufficient_scope'],
      ] as const) {
        const res = await patch(`/v1/users/${target}`, caller.headers, { name: 'Nope' });
        expect(res.statusCode).toBe(403);
        expect(res.json().error).toBe(error);
      }
      const invalid = await patch(`/v1/users/${member.userId}`, member.headers, { role: 'king', x: 1 });
      expect(invalid.statusCode).toBe(403);
      expect((await atrium.services.core.users.get(member.userId)).role).toBe('member');
    });

    it('requires credentials before validating the body', async () => {
      const res = await patch(`/v1/users/${member.userId}`, {}, { name: 'x'.repeat(500) });
      expect(res.statusCode).toBe(401);
    });

    const invalidBodies: Array<[string, unknown, string, string]> = [
      ['invalid email', { email: 'not-an-email' }, 'email', 'invalid_format'],
      ['email without a domain', { email: 'ada@' }, 'email', 'invalid_format'],
      ['email with spaces', { email: 'ada lovelace@example.com' }, 'email', 'invalid_format'],
      ['email with a zero-width space', { email: 'ad\u200bmin@example.com' }, 'email', 'invalid_format'],
      ['name of 101 characters', { name: 'n'.repeat(101) }, 'name', 'range_error'],
      ['empty name', { name: '' }, 'name', 'range_error'],
      ['blank name', { name: '   ' }, 'name', 'range_error'],
      ['unknown role', { role: 'owner' }, 'role', 'invalid_enum'],
      ['role in the wrong case', { role: 'ADMIN' }, 'role', 'invalid_enum'],
      ['unknown field', { nickname: 'x' }, 'nickname', 'unknown_field'],
      ['name of the wrong type', { name: 42 }, 'name', 'invalid_type'],
      ['role of the wrong type', { role: ['admin'] }, 'role', 'invalid_type'],
      ['null email', { email: null }, 'email', 'invalid_type'],
    ];
    it.each(invalidBodies)(
      'refuses %s with 400 VALIDATION_ERROR and a detail',
      async (_label, body, field, code) => {
        const target = await atrium.caller();
        const res = await patch(`/v1/users/${target.userId}`, admin.headers, body);
        expect(res.statusCode).toBe(400);
        const json = res.json();
        expect(json).toMatchObject({ error: 'VALIDATION_ERROR', message: expect.any(String) });
        expect(json.request_id).toBe(res.headers['x-request-id']);
        expect(json.details).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
        expect((await atrium.services.core.users.get(target.userId)).email).toBe(
          `${(await atrium.services.core.users.get(target.userId)).handle}@example.com`,
        );
      },
    );

    it("says a blank name must not be blank, not which pattern it failed, with the core's code (as GraphQL and gRPC)", async () => {
      const target = await atrium.caller();
      for (const name of ['   ', '\u200b\u200d', '\u{E0020}\u{E0041} ']) {
        const res = await patch(`/v1/users/${target.userId}`, admin.headers, { name });
        expect(res.statusCode).toBe(400);
        expect(res.json().details).toEqual([
          { field: 'name', message: 'name must not be blank', code: 'range_error' },
        ]);
      }
    });

    it('reports every problem of a body at once', async () => {
      const res = await patch(`/v1/users/${member.userId}`, admin.headers, {
        name: '',
        email: 'x',
        role: 'z',
      });
      expect(res.statusCode).toBe(400);
      expect(
        res
          .json()
          .details.map((d: { field: string }) => d.field)
          .sort(),
      ).toEqual(['email', 'name', 'role']);
    });

    it('refuses malformed JSON and bodies that are not objects', async () => {
      for (const payload of ['{"name": "a",', '[]', '"name"', '42', 'null']) {
        const res = await raw('PATCH', `/v1/users/${member.userId}`, admin.headers, payload);
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toBe('VALIDATION_ERROR');
      }
    });

    it('answers 404 NOT_FOUND for a missing user and 409 CONFLICT for a taken email', async () => {
      const missing = await patch('/v1/users/usr_doesnotexist0000000000000', admin.headers, { name: 'X' });
      expect(missing.statusCode).toBe(404);
      expect(missing.json().error).toBe('NOT_FOUND');
      const taken = (await atrium.services.core.users.get(other.userId)).email;
      const conflict = await patch(`/v1/users/${member.userId}`, admin.headers, { email: taken });
      expect(conflict.statusCode).toBe(409);
      expect(conflict.json().error).toBe('CONFLICT');
    });
  });

  describe('GET /v1/organizations/{organization_id}', () => {
    it('shows the organization to its members and to admins', async () => {
      const org = await atrium.services.core.organizations.create({ name: 'Analytical Engines' });
      const user = await atrium.services.core.users.create({
        handle: `orgmember${Date.now()}`,
        email: `orgmember${Date.now()}@example.com`,
        organizationId: org.id,
      });
      const key = await atrium.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
      for (const headers of [{ 'x-api-key': key.key }, admin.headers]) {
        const res = await get(`/v1/organizations/${org.id}`, headers);
        expect(res.statusCode).toBe(200);
        expect(res.json()).toEqual({
          id: org.id,
          name: 'Analytical Engines',
          created_at: org.createdAt,
          _links: { self: { href: `/v1/organizations/${org.id}` } },
        });
      }
      const outsider = await get(`/v1/organizations/${org.id}`, member.headers);
      expect(outsider.statusCode).toBe(403);
      expect(outsider.json().error).toBe('FORBIDDEN');
    });

    it('lets a member read their own organization from the user link', async () => {
      const me = (await get(`/v1/users/${member.userId}`, member.headers)).json();
      const res = await get(me._links.organization.href, member.headers);
      expect(res.statusCode).toBe(200);
      expect(res.json().id).toBe(me.organization_id);
    });

    it('answers 404 NOT_FOUND for a missing organization', async () => {
      const res = await get('/v1/organizations/org_doesnotexist0000000000000', admin.headers);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: 'NOT_FOUND', details: [] });
    });
  });

  describe('POST /api/v2/users/{user_id}/verify', () => {
    it("verifies the caller's own email with 204 and no body", async () => {
      const me = await atrium.caller();
      const res = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${me.userId}/verify`,
        headers: me.headers,
      });
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(res.headers['content-type']).toBeUndefined();
      expect((await atrium.services.core.users.get(me.userId)).emailVerifiedAt).not.toBeNull();
      const again = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${me.userId}/verify`,
        headers: me.headers,
      });
      expect(again.statusCode).toBe(204);
    });

    it('answers under /api/v1 too, alike and with the deprecation headers', async () => {
      const me = await atrium.caller();
      const res = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v1/users/${me.userId}/verify`,
        headers: me.headers,
      });
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(res.headers.deprecation).toBe('true');
      expect(res.headers.link).toBe(`</api/v2/users/${me.userId}/verify>; rel="successor-version"`);
      expect((await atrium.services.core.users.get(me.userId)).emailVerifiedAt).not.toBeNull();
      const refused = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v1/users/${admin.userId}/verify`,
        headers: member.headers,
      });
      expect(refused.statusCode).toBe(403);
    });

    it('lets an admin verify anyone and refuses other members with 403 forbidden', async () => {
      const target = await atrium.caller();
      const refused = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${target.userId}/verify`,
        headers: member.headers,
      });
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error).toBe('forbidden');
      expect((await atrium.services.core.users.get(target.userId)).emailVerifiedAt).toBeNull();
      const ok = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${target.userId}/verify`,
        headers: admin.headers,
      });
      expect(ok.statusCode).toBe(204);
    });

    it('needs users:write: a viewer gets 403 naming the scope', async () => {
      const res = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${viewer.userId}/verify`,
        headers: viewer.headers,
      });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ error: 'insufficient_scope' });
      expect(res.json().message).toContain('users:write');
    });

    it('answers 404 not_found for a missing user and 401 without credentials', async () => {
      const missing = await atrium.http!.inject({
        method: 'POST',
        url: '/api/v2/users/usr_doesnotexist0000000000000/verify',
        headers: admin.headers,
      });
      expect(missing.statusCode).toBe(404);
      expect(missing.json().error).toBe('not_found');
      const anonymous = await atrium.http!.inject({
        method: 'POST',
        url: `/api/v2/users/${member.userId}/verify`,
      });
      expect(anonymous.statusCode).toBe(401);
    });
  });
});
