import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { type Catalogue, createOrder, type Headers, makeCatalogue, orderBody, request } from './fixtures.js';

describe('GET /api/v2/orders', () => {
  let atrium: TestAtrium;
  let cat: Catalogue;
  let owner: Headers;
  let ids: string[]; // oldest first
  let cancelled: string[];

  const list = (query = '', headers: Headers = owner) =>
    request(atrium, 'GET', `/api/v2/orders${query}`, headers);

  /** Follows next_cursor to the end and returns every id in the order served. */
  async function walk(query: string, headers: Headers = owner): Promise<string[]> {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 100; guard++) {
      const sep = query.includes('?') ? '&' : '?';
      const res = await list(cursor ? `${query}${sep}cursor=${encodeURIComponent(cursor)}` : query, headers);
      expect(res.statusCode).toBe(200);
      const page = res.json();
      seen.push(...page.data.map((o: { id: string }) => o.id));
      expect(page.pagination.has_more).toBe(page.pagination.next_cursor !== null);
      cursor = page.pagination.next_cursor;
      if (!cursor) return seen;
    }
    throw new Error('pagination did not end');
  }

  beforeAll(async () => {
    atrium = await startTestAtrium();
    cat = await makeCatalogue(atrium);
    owner = (await atrium.caller()).headers;
    ids = [];
    for (let i = 0; i < 25; i++) ids.push((await createOrder(atrium, owner, orderBody(cat))).id);
    cancelled = [ids[3]!, ids[10]!, ids[20]!];
    for (const id of cancelled) await request(atrium, 'POST', `/api/v2/orders/${id}/cancel`, owner);
    // Someone else's orders must never show up.
    const stranger = (await atrium.caller()).headers;
    for (let i = 0; i < 3; i++) await createOrder(atrium, stranger, orderBody(cat));
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('answers the envelope with 20 orders by default, newest first, and Cache-Control: no-store', async () => {
    const res = await list();
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const page = res.json();
    expect(page.pagination).toMatchObject({ has_more: true, limit: 20 });
    expect(typeof page.pagination.next_cursor).toBe('string');
    expect(page.data.map((o: { id: string }) => o.id)).toEqual([...ids].reverse().slice(0, 20));
    expect(page.data[0]).toMatchObject({ currency: 'USD', amount_cents: 2899 });
  });

  it("pages through exactly the caller's orders, each once", async () => {
    expect(await walk('?limit=7')).toEqual([...ids].reverse());
  });

  it('the last page has has_more false and next_cursor null', async () => {
    const res = await list('?limit=100');
    expect(res.json().data).toHaveLength(25);
    expect(res.json().pagination).toEqual({ has_more: false, next_cursor: null, limit: 100 });
  });

  it('sort=created_at gives oldest first; -created_at newest first', async () => {
    expect(await walk('?sort=created_at&limit=6')).toEqual(ids);
    expect(await walk('?sort=-created_at&limit=6')).toEqual([...ids].reverse());
  });

  it('filters by status, and pages within the filter', async () => {
    expect(await walk('?status=CANCELLED&limit=2')).toEqual([...cancelled].reverse());
    const pending = await walk('?status=PENDING&limit=10');
    expect(pending).toHaveLength(22);
    expect(pending.some((id) => cancelled.includes(id))).toBe(false);
    const shipped = await list('?status=SHIPPED');
    expect(shipped.json()).toEqual({
      data: [],
      pagination: { has_more: false, next_cursor: null, limit: 20 },
    });
  });

  it('breaks ties of created_at by id, without skipping or repeating', async () => {
    const tied = await atrium.caller();
    const mine: string[] = [];
    for (let i = 0; i < 9; i++) mine.push((await createOrder(atrium, tied.headers, orderBody(cat))).id);
    await atrium.services.store.db
      .updateTable('orders')
      .set({ created_at: '2026-01-01T00:00:00.000Z' })
      .where('owner_id', '=', tied.userId)
      .execute();
    expect(await walk('?limit=2', tied.headers)).toEqual([...mine].sort().reverse());
    expect(await walk('?limit=4&sort=created_at', tied.headers)).toEqual([...mine].sort());
  });

  it('a viewer (orders:read) may list; an unauthenticated caller may not', async () => {
    const viewer = await atrium.caller({ role: 'viewer' });
    const res = await list('', viewer.headers);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual([]);
    expect((await list('', {})).statusCode).toBe(401);
  });

  describe('bad query parameters are 400 with details', () => {
    it.each([
      ['?limit=0', 'limit', 'range_error'],
      ['?limit=101', 'limit', 'range_error'],
      ['?limit=-1', 'limit', 'range_error'],
      ['?limit=100000000000', 'limit', 'range_error'],
      ['?limit=abc', 'limit', 'invalid_type'],
      ['?limit=1.5', 'limit', 'invalid_type'],
      ['?status=pending', 'status', 'invalid_enum'],
      ['?status=LOST', 'status', 'invalid_enum'],
      ['?sort=amount', 'sort', 'invalid_enum'],
      ['?sort=%2Bcreated_at', 'sort', 'invalid_enum'],
      ['?cursor=', 'cursor', 'range_error'],
    ])('%s', async (query, field, code) => {
      const res = await list(query);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('validation_error');
      expect(res.json().details).toContainEqual(expect.objectContaining({ field, code }));
    });
  });

  describe('cursors are opaque and bound to their list', () => {
    let cursor: string;
    beforeAll(async () => {
      cursor = (await list('?limit=5')).json().pagination.next_cursor;
    });

    const rejects = async (query: string, headers: Headers = owner) => {
      const res = await list(query, headers);
      expect(res.statusCode).toBe(400);
      expect(res.json().details[0]).toMatchObject({ field: 'cursor', code: 'invalid_cursor' });
    };

    it('a forged cursor (one character changed) is 400', async () => {
      const i = Math.floor(cursor.length / 2);
      const forged = cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1);
      await rejects(`?cursor=${forged}`);
    });

    it('garbled and hand-made cursors are 400', async () => {
      await rejects('?cursor=not-a-cursor');
      await rejects(`?cursor=${encodeURIComponent('!!!***')}`);
      const handMade = Buffer.from(JSON.stringify({ s: 'orders', i: ids[0], t: '2020-01-01' })).toString(
        'base64url',
      );
      await rejects(`?cursor=${handMade}`);
      await rejects(`?cursor=${'A'.repeat(1024)}`);
    });

    it('a cursor used with another status filter or sort is 400', async () => {
      await rejects(`?cursor=${cursor}&status=PENDING`);
      await rejects(`?cursor=${cursor}&sort=created_at`);
    });

    it('another caller cannot use my cursor', async () => {
      const stranger = (await atrium.caller()).headers;
      await rejects(`?cursor=${cursor}`, stranger);
    });

    it('the genuine cursor works with its own list', async () => {
      const res = await list(`?limit=5&cursor=${cursor}`);
      expect(res.statusCode).toBe(200);
      expect(res.json().data[0].id).toBe([...ids].reverse()[5]);
    });
  });
});
