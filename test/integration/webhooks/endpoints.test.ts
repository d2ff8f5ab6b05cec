import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint, Receiver, verifyWithStripe } from './support.js';

/** The endpoint API (validation, ownership, scopes), rotation, and every event type from its change. */
let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium({ WEBHOOK_BACKOFF_BASE_MS: '50' }, ['api', 'auth', 'worker']);
  receiver = await new Receiver().start();
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

const BASE = '/api/v2/webhook_endpoints';

describe('endpoint management', () => {
  it('creates (secret once), lists, reads, updates and deletes; the secret never shows again', async () => {
    const who = await atrium.caller();
    const created = await api(atrium, 'POST', BASE, who.headers, {
      url: receiver.url('/crud'),
      events: ['order.cancelled', 'order.created', 'order.created'],
    });
    expect(created.status).toBe(201);
    const body = created.body as Record<string, unknown>;
    expect(body).toMatchObject({
      url: receiver.url('/crud'),
      events: ['order.created', 'order.cancelled'],
      status: 'enabled',
      user_id: who.userId,
    });
    expect(body.id).toMatch(/^whe_/);
    expect(body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);

    const list = await api(atrium, 'GET', BASE, who.headers);
    expect(list.status).toBe(200);
    const page = list.body as { data: Array<Record<string, unknown>>; pagination: Record<string, unknown> };
    expect(page.data.map((e) => e.id)).toEqual([body.id]);
    expect(page.pagination).toEqual({ has_more: false, next_cursor: null, limit: 20 });
    expect(page.data[0]).not.toHaveProperty('secret');

    const one = await api(atrium, 'GET', `${BASE}/${String(body.id)}`, who.headers);
    expect(one.body).not.toHaveProperty('secret');
    const patched = await api(atrium, 'PATCH', `${BASE}/${String(body.id)}`, who.headers, {
      events: ['*'],
      url: receiver.url('/crud2'),
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ events: ['*'], url: receiver.url('/crud2') });
    const deleted = await api(atrium, 'DELETE', `${BASE}/${String(body.id)}`, who.headers);
    expect(deleted.status).toBe(204);
    expect((await api(atrium, 'GET', `${BASE}/${String(body.id)}`, who.headers)).status).toBe(404);
  });

  it('pages with a signed cursor', async () => {
    const who = await atrium.caller();
    for (let i = 0; i < 3; i++) await createEndpoint(atrium, who.headers, { url: receiver.url(`/page${i}`) });
    const first = await api(atrium, 'GET', `${BASE}?limit=2`, who.headers);
    const p1 = first.body as {
      data: Array<{ url: string }>;
      pagination: { has_more: boolean; next_cursor: string };
    };
    expect(p1.data.map((e) => e.url)).toEqual([receiver.url('/page2'), receiver.url('/page1')]);
    expect(p1.pagination.has_more).toBe(true);
    const second = await api(
      atrium,
      'GET',
      `${BASE}?limit=2&cursor=${encodeURIComponent(p1.pagination.next_cursor)}`,
      who.headers,
    );
    expect((second.body as { data: Array<{ url: string }> }).data.map((e) => e.url)).toEqual([
      receiver.url('/page0'),
    ]);
    const forged = await api(atrium, 'GET', `${BASE}?cursor=abc`, who.headers);
    expect(forged.status).toBe(400);
  });

  it.each([
    [{ url: 'not a url' }, 'url', 'invalid_format'],
    [{ url: 'ftp://example.com/hook' }, 'url', 'invalid_format'],
    [{ url: 'https://user:pw@example.com/hook' }, 'url', 'invalid_format'],
    [{ url: 'https://example.com/hook', events: ['order.shipped'] }, 'events[0]', 'invalid_enum'],
    [{ url: 'https://example.com/hook', extra: 1 }, null, 'unknown_field'],
    [{}, 'url', 'required'],
  ])('refuses %j with a validation error naming the field', async (payload, field, code) => {
    const who = await atrium.caller();
    const res = await api(atrium, 'POST', BASE, who.headers, payload);
    expect(res.status).toBe(400);
    const body = res.body as { error: string; details: Array<{ field: string | null; code: string }> };
    expect(body.error).toBe('validation_error');
    expect(body.details.some((d) => d.code === code && (field === null || d.field === field))).toBe(true);
  });

  it('"*" together with a type is refused', async () => {
    const who = await atrium.caller();
    const res = await api(atrium, 'POST', BASE, who.headers, {
      url: receiver.url('/x'),
      events: ['*', 'order.created'],
    });
    expect(res.status).toBe(400);
  });

  it('belongs to its owner: others get 403, unknown ids 404, admins may act, no credentials 401', async () => {
    const owner = await atrium.caller();
    const other = await atrium.caller();
    const admin = await atrium.caller({ role: 'admin' });
    const endpoint = await createEndpoint(atrium, owner.headers, { url: receiver.url('/owned') });
    const path = `${BASE}/${endpoint.id}`;
    expect((await api(atrium, 'GET', path, other.headers)).status).toBe(403);
    expect((await api(atrium, 'PATCH', path, other.headers, { events: ['*'] })).status).toBe(403);
    expect((await api(atrium, 'DELETE', path, other.headers)).status).toBe(403);
    expect((await api(atrium, 'POST', `${path}/rotate_secret`, other.headers)).status).toBe(403);
    expect((await api(atrium, 'GET', `${path}/attempts`, other.headers)).status).toBe(403);
    expect((await api(atrium, 'GET', `${BASE}/whe_unknown`, owner.headers)).status).toBe(404);
    expect((await api(atrium, 'GET', path, admin.headers)).status).toBe(200);
    expect((await api(atrium, 'GET', `${BASE}?user_id=${owner.userId}`, other.headers)).status).toBe(403);
    expect((await api(atrium, 'GET', `${BASE}?user_id=${owner.userId}`, admin.headers)).status).toBe(200);
    expect(
      (await api(atrium, 'POST', BASE, other.headers, { url: receiver.url('/x'), user_id: owner.userId }))
        .status,
    ).toBe(403);
    expect((await api(atrium, 'GET', path, {})).status).toBe(401);
  });

  it('reading needs users:read and changing users:write (a viewer may list but not create)', async () => {
    const viewer = await atrium.caller({ role: 'viewer' });
    expect((await api(atrium, 'GET', BASE, viewer.headers)).status).toBe(200);
    const res = await api(atrium, 'POST', BASE, viewer.headers, { url: receiver.url('/viewer') });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: 'insufficient_scope' });
    expect(JSON.stringify(res.body)).toContain('users:write');
  });

  it('is documented in /openapi.json', async () => {
    const res = await atrium.http!.inject({ method: 'GET', url: '/openapi.json' });
    const doc = res.json() as { paths: Record<string, Record<string, unknown>> };
    for (const p of [
      '/api/v2/webhook_endpoints',
      '/api/v2/webhook_endpoints/{endpoint_id}',
      '/api/v2/webhook_endpoints/{endpoint_id}/rotate_secret',
      '/api/v2/webhook_endpoints/{endpoint_id}/attempts',
      '/api/v2/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/resend',
      '/api/v2/events/{event_id}/attempts',
    ]) {
      expect(doc.paths[p], p).toBeDefined();
    }
  });
});

describe('secret rotation', () => {
  it('signs with both secrets for 24 h: Stripe verifies with the old and with the new one', async () => {
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, { url: receiver.url('/rotate') });
    const rotated = await api(atrium, 'POST', `${BASE}/${endpoint.id}/rotate_secret`, who.headers);
    expect(rotated.status).toBe(200);
    const fresh = rotated.body as { secret: string; previous_secret_expires_at: string };
    expect(fresh.secret).not.toBe(endpoint.secret);
    const overlap = Date.parse(fresh.previous_secret_expires_at) - Date.now();
    expect(overlap).toBeGreaterThan(24 * 3600_000 - 60_000);
    expect(overlap).toBeLessThanOrEqual(24 * 3600_000);

    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    await receiver.until(() => receiver.at('/rotate').length >= 1);
    const got = receiver.at('/rotate')[0]!;
    expect(String(got.headers['x-webhook-signature'])).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifyWithStripe(got, fresh.secret).id).toBe(got.eventId);
    expect(verifyWithStripe(got, endpoint.secret).id).toBe(got.eventId);
    expect(() => verifyWithStripe(got, 'whsec_neither')).toThrow();

    // Once the overlap has passed, only the new secret signs.
    await atrium.services.store.db
      .updateTable('webhook_endpoints')
      .set({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() })
      .where('id', '=', endpoint.id)
      .execute();
    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    await receiver.until(() => receiver.at('/rotate').length >= 2);
    const later = receiver.at('/rotate')[1]!;
    expect(String(later.headers['x-webhook-signature'])).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    verifyWithStripe(later, fresh.secret);
    expect(() => verifyWithStripe(later, endpoint.secret)).toThrow();
  });
});

describe('events from the changes that cause them', () => {
  it('order.created, order.updated, order.cancelled, order.refunded and user.updated arrive, in order', async () => {
    const who = await atrium.caller();
    const admin = await atrium.caller({ role: 'admin' });
    const endpoint = await createEndpoint(atrium, who.headers, { url: receiver.url('/all') });
    const a = (await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue))).body as {
      id: string;
    };
    await api(atrium, 'PATCH', `/api/v2/orders/${a.id}`, who.headers, { currency: 'EUR' });
    await api(atrium, 'POST', `/api/v2/orders/${a.id}/cancel`, who.headers);
    const b = (await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue))).body as {
      id: string;
    };
    await atrium.services.core.orders.update(SYSTEM_ACTOR, b.id, { status: 'PROCESSING' });
    await atrium.services.core.orders.update(SYSTEM_ACTOR, b.id, { status: 'SHIPPED' });
    expect((await api(atrium, 'POST', `/api/v2/orders/${b.id}/refund`, who.headers)).status).toBe(204);
    expect(
      (await api(atrium, 'PATCH', `/v1/users/${who.userId}`, admin.headers, { name: 'New Name' })).status,
    ).toBe(200);
    const expected = [
      'order.created',
      'order.updated',
      'order.cancelled',
      'order.created',
      'order.updated',
      'order.updated',
      'order.refunded',
      'user.updated',
    ];
    await receiver.until(() => receiver.at('/all').length >= expected.length);
    const got = receiver.at('/all');
    expect(got.map((r) => r.type).sort()).toEqual([...expected].sort());
    for (const r of got) verifyWithStripe(r, endpoint.secret);
    const user = got.find((r) => r.type === 'user.updated')!;
    expect(JSON.parse(user.raw).data.object).toMatchObject({ id: who.userId, name: 'New Name' });
    const refunded = got.find((r) => r.type === 'order.refunded')!;
    expect(JSON.parse(refunded.raw).data).toMatchObject({ id: b.id, status: 'SHIPPED' });
    expect(new Set(got.map((r) => r.eventId)).size).toBe(expected.length);
  });

  it('a deleted user’s endpoints are gone: not found, and its events no longer sent', async () => {
    const doomed = await atrium.caller();
    const other = await atrium.caller();
    const admin = await atrium.caller({ role: 'admin' });
    const endpoint = await createEndpoint(atrium, doomed.headers, { url: receiver.url('/gone') });
    await createEndpoint(atrium, other.headers, { url: receiver.url('/still-here') });
    const order = (await api(atrium, 'POST', '/api/v2/orders', doomed.headers, orderBody(catalogue)))
      .body as {
      id: string;
    };
    await receiver.until(() => receiver.at('/gone').length >= 1);

    await atrium.services.core.users.delete(SYSTEM_ACTOR, doomed.userId);
    expect((await api(atrium, 'GET', `${BASE}/${endpoint.id}`, admin.headers)).status).toBe(404);
    expect((await api(atrium, 'POST', `/api/v2/orders/${order.id}/cancel`, admin.headers)).status).toBe(204);
    // A later event to another endpoint marks the point by which the cancel would have gone out.
    const later = (await api(atrium, 'POST', '/api/v2/orders', other.headers, orderBody(catalogue))).body as {
      id: string;
    };
    await receiver.until(() => receiver.at('/still-here').length >= 1);
    expect(JSON.parse(receiver.at('/still-here')[0]!.raw).data.id).toBe(later.id);
    expect(receiver.at('/gone').map((r) => r.type)).toEqual(['order.created']);
  });

  it('an endpoint receives only the types it subscribed to, and only its owner’s events', async () => {
    const who = await atrium.caller();
    const stranger = await atrium.caller();
    await createEndpoint(atrium, who.headers, { url: receiver.url('/cancels'), events: ['order.cancelled'] });
    const a = (await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue))).body as {
      id: string;
    };
    await api(atrium, 'POST', `/api/v2/orders/${a.id}/cancel`, who.headers);
    const s = (await api(atrium, 'POST', '/api/v2/orders', stranger.headers, orderBody(catalogue))).body as {
      id: string;
    };
    await api(atrium, 'POST', `/api/v2/orders/${s.id}/cancel`, stranger.headers);
    await receiver.until(() => receiver.at('/cancels').length >= 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.at('/cancels').map((r) => r.type)).toEqual(['order.cancelled']);
    expect(JSON.parse(receiver.at('/cancels')[0]!.raw).data.id).toBe(a.id);
  });

  it('a test event (payment.failed) goes to that one endpoint only, whatever it subscribed to', async () => {
    const who = await atrium.caller();
    const target = await createEndpoint(atrium, who.headers, {
      url: receiver.url('/test-target'),
      events: ['order.created'],
    });
    await createEndpoint(atrium, who.headers, { url: receiver.url('/test-other') });
    const res = await api(atrium, 'POST', `${BASE}/${target.id}/test`, who.headers, {
      type: 'payment.failed',
    });
    expect(res.status).toBe(202);
    const queued = res.body as { id: string; type: string };
    expect(queued.type).toBe('payment.failed');
    await receiver.until(() => receiver.at('/test-target').length >= 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.at('/test-other')).toHaveLength(0);
    const got = receiver.at('/test-target')[0]!;
    expect(verifyWithStripe(got, target.secret)).toMatchObject({ id: queued.id, type: 'payment.failed' });
    expect(JSON.parse(got.raw)).toEqual(queued);
    const bad = await api(atrium, 'POST', `${BASE}/${target.id}/test`, who.headers, {
      type: 'order.shipped',
    });
    expect(bad.status).toBe(400);
  });
});
