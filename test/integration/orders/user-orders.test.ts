import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { type Catalogue, createOrder, makeCatalogue, orderBody, request } from './fixtures.js';

describe('GET /v1/users/{user_id}/orders', () => {
  let atrium: TestAtrium;
  let cat: Catalogue;
  let user: Awaited<ReturnType<TestAtrium['caller']>>;
  const ids: string[] = [];

  const list = (userId: string, headers: Record<string, string>, query = '') =>
    request(atrium, 'GET', `/v1/users/${userId}/orders${query}`, headers);

  beforeAll(async () => {
    atrium = await startTestAtrium();
    cat = await makeCatalogue(atrium);
    user = await atrium.caller();
    for (let i = 0; i < 5; i++) ids.push((await createOrder(atrium, user.headers, orderBody(cat))).id);
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('a user lists their own orders in the pagination envelope, newest first', async () => {
    const res = await list(user.userId, user.headers, '?limit=3');
    expect(res.statusCode).toBe(200);
    const page = res.json();
    expect(page.data.map((o: { id: string }) => o.id)).toEqual([...ids].reverse().slice(0, 3));
    expect(page.data[0]).toMatchObject({ amount_cents: 2899, currency: 'USD', status: 'PENDING' });
    expect(page.pagination).toMatchObject({ has_more: true, limit: 3 });
    const next = await list(user.userId, user.headers, `?limit=3&cursor=${page.pagination.next_cursor}`);
    expect(next.json().data.map((o: { id: string }) => o.id)).toEqual([...ids].reverse().slice(3));
    expect(next.json().pagination).toEqual({ has_more: false, next_cursor: null, limit: 3 });
  });

  it('the default page size is 20', async () => {
    const res = await list(user.userId, user.headers);
    expect(res.json().pagination.limit).toBe(20);
    expect(res.json().data).toHaveLength(5);
  });

  it('an admin may list anyone’s orders', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const res = await list(user.userId, admin.headers);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toHaveLength(5);
  });

  it('another member gets 403', async () => {
    const other = await atrium.caller();
    const res = await list(user.userId, other.headers);
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('FORBIDDEN');
  });

  it('an admin asking for an unknown user gets 404 NOT_FOUND', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    for (const id of ['usr_00000000000000000000000000', 'usr_%00']) {
      const res = await list(id, admin.headers);
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toBe('NOT_FOUND');
    }
  });

  it.each(['?limit=0', '?limit=101', '?limit=x'])('%s is 400 VALIDATION_ERROR', async (query) => {
    const res = await list(user.userId, user.headers, query);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('VALIDATION_ERROR');
    expect(res.json().details[0].field).toBe('limit');
  });

  it('a cursor from /api/v2/orders is not valid here for another user, and a forged one is 400', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    for (let i = 0; i < 2; i++) await createOrder(atrium, admin.headers, orderBody(cat));
    const adminCursor = (await request(atrium, 'GET', '/api/v2/orders?limit=1', admin.headers)).json()
      .pagination.next_cursor;
    const res = await list(user.userId, admin.headers, `?cursor=${adminCursor}`);
    expect(res.statusCode).toBe(400);
    expect((await list(user.userId, user.headers, '?cursor=garbage')).statusCode).toBe(400);
  });

  it('credential errors keep the codes every API uses: 401 invalid_api_key, 403 insufficient_scope', async () => {
    expect((await list(user.userId, {})).statusCode).toBe(401);
    const revoked = await atrium.caller();
    await atrium.services.apiKeys.revoke(revoked.keyId);
    const res = await list(revoked.userId, revoked.headers);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_api_key');
  });
});
