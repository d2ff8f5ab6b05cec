import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../../src/domain/clock.js';
import { fingerprint } from '../../../src/domain/idempotency.js';

/** The spec's idempotency key retention, written out: a test of the rule, not of the constant. */
const RETENTION_SECONDS = 86_400;
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { type Catalogue, type Headers, makeCatalogue, orderBody, request } from './fixtures.js';

/** A clock the test moves by hand, to cross the 24-hour retention without waiting. */
class ManualClock implements Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}

describe('Idempotency-Key on POST /api/v2/orders', () => {
  let atrium: TestAtrium;
  let cat: Catalogue;
  let member: Headers;
  let ownerId: string;
  const clock = new ManualClock();
  let n = 0;
  const freshKey = () => `key-${Date.now()}-${++n}`;

  const post = (key: string | undefined, body: unknown, headers: Headers = member, url = '/api/v2/orders') =>
    request(atrium, 'POST', url, key === undefined ? headers : { ...headers, 'idempotency-key': key }, body);
  const ordersOf = async (owner: string) =>
    (
      await atrium.services.store.db.selectFrom('orders').select('id').where('owner_id', '=', owner).execute()
    ).map((r) => r.id);

  beforeAll(async () => {
    atrium = await startTestAtrium({}, undefined, { clock });
    cat = await makeCatalogue(atrium);
    const caller = await atrium.caller();
    member = caller.headers;
    ownerId = caller.userId;
  });
  afterAll(async () => {
    await atrium.stop();
  });

  it('replays the stored response with Idempotent-Replayed: true and creates nothing new', async () => {
    const key = freshKey();
    const before = (await ordersOf(ownerId)).length;
    const first = await post(key, orderBody(cat));
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const second = await post(key, orderBody(cat));
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json()).toEqual(first.json());
    expect(second.headers.location).toBe(first.headers.location);
    expect((await ordersOf(ownerId)).length).toBe(before + 1);
  });

  it('replays the first body even after the order changed since', async () => {
    const key = freshKey();
    const first = (await post(key, orderBody(cat))).json();
    expect((await request(atrium, 'POST', `/api/v2/orders/${first.id}/cancel`, member)).statusCode).toBe(204);
    const replay = await post(key, orderBody(cat));
    expect(replay.json()).toEqual(first);
    expect(replay.json().status).toBe('PENDING');
  });

  it('treats the same JSON with another key order as the same request', async () => {
    const key = freshKey();
    const body = orderBody(cat);
    const reordered = {
      shipping_address: body.shipping_address,
      currency: body.currency,
      items: body.items.map((i) => ({ quantity: i.quantity, product_id: i.product_id })),
    };
    const first = await post(key, body);
    const second = await post(key, JSON.stringify(reordered, null, 2));
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json().id).toBe(first.json().id);
  });

  it('answers 422 idempotency_key_reused for the same key with a different body', async () => {
    const key = freshKey();
    expect((await post(key, orderBody(cat))).statusCode).toBe(201);
    const before = (await ordersOf(ownerId)).length;
    const res = await post(key, orderBody(cat, { currency: 'EUR' }));
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('idempotency_key_reused');
    expect((await ordersOf(ownerId)).length).toBe(before);
  });

  it('keys belong to the caller: another caller with the same key gets its own order', async () => {
    const key = freshKey();
    const other = await atrium.caller();
    const mine = (await post(key, orderBody(cat))).json();
    const theirs = await post(key, orderBody(cat), other.headers);
    expect(theirs.statusCode).toBe(201);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(theirs.json().id).not.toBe(mine.id);
    expect(theirs.json().owner_id).toBe(other.userId);
  });

  it('a key used on v2 cannot replay on v1 (the route is part of the request)', async () => {
    const key = freshKey();
    expect((await post(key, orderBody(cat))).statusCode).toBe(201);
    const res = await post(key, orderBody(cat), member, '/api/v1/orders');
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('idempotency_key_reused');
    // The body is the same: the message must not say it differs.
    expect(res.json().message).toBe(
      'This Idempotency-Key was already used for a different request (another body or another endpoint).',
    );
  });

  it('without a key every POST creates an order', async () => {
    const before = (await ordersOf(ownerId)).length;
    await post(undefined, orderBody(cat));
    await post(undefined, orderBody(cat));
    expect((await ordersOf(ownerId)).length).toBe(before + 2);
  });

  it('releases the key when the request fails, so a corrected retry is processed', async () => {
    const key = freshKey();
    const bad = await post(key, orderBody(cat, { items: [{ product_id: 'prd_nope', quantity: 1 }] }));
    expect(bad.statusCode).toBe(422);
    const record = await atrium.services.store.db
      .selectFrom('idempotency_records')
      .selectAll()
      .where('idem_key', '=', key)
      .executeTakeFirst();
    expect(record).toBeUndefined();
    const good = await post(key, orderBody(cat));
    expect(good.statusCode).toBe(201);
    expect(good.headers['idempotent-replayed']).toBeUndefined();
  });

  it('stores the record for 86,400 seconds and processes the key afresh after that', async () => {
    const key = freshKey();
    const first = (await post(key, orderBody(cat))).json();
    const record = await atrium.services.store.db
      .selectFrom('idempotency_records')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .where('idem_key', '=', key)
      .executeTakeFirstOrThrow();
    expect(record.state).toBe('done');
    expect(record.response_status).toBe(201);
    expect(Date.parse(record.expires_at) - Date.parse(record.created_at)).toBe(RETENTION_SECONDS * 1000);

    clock.offsetMs = (RETENTION_SECONDS - 60) * 1000;
    const within = await post(key, orderBody(cat));
    expect(within.headers['idempotent-replayed']).toBe('true');
    expect(within.json().id).toBe(first.id);

    clock.offsetMs = (RETENTION_SECONDS + 1) * 1000;
    const after = await post(key, orderBody(cat));
    expect(after.statusCode).toBe(201);
    expect(after.headers['idempotent-replayed']).toBeUndefined();
    expect(after.json().id).not.toBe(first.id);
    clock.offsetMs = 0;
  });

  it('purges expired records', async () => {
    const key = freshKey();
    await post(key, orderBody(cat));
    clock.offsetMs = (RETENTION_SECONDS + 1) * 1000;
    const purged = await atrium.services.core.idempotency.purgeExpired();
    clock.offsetMs = 0;
    expect(purged).toBeGreaterThanOrEqual(1);
    const left = await atrium.services.store.db
      .selectFrom('idempotency_records')
      .select('idem_key')
      .where('idem_key', '=', key)
      .execute();
    expect(left).toEqual([]);
  });

  it('answers 409 idempotency_in_progress while the first request is unfinished, and takes over an abandoned one', async () => {
    const key = freshKey();
    const body = orderBody(cat);
    const now = clock.now();
    await atrium.services.store.db
      .insertInto('idempotency_records')
      .values({
        owner_id: ownerId,
        idem_key: key,
        request_hash: fingerprint({ route: 'POST /api/v2/orders', body }),
        state: 'in_progress',
        response_status: null,
        response_body: null,
        response_headers: null,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + 86_400_000).toISOString(),
      })
      .execute();
    const busy = await post(key, body);
    expect(busy.statusCode).toBe(409);
    expect(busy.json().error).toBe('idempotency_in_progress');
    // A different body is a client mistake whatever the state of the first request.
    expect((await post(key, orderBody(cat, { currency: 'GBP' }))).statusCode).toBe(422);

    // Two minutes later the claim is considered abandoned (its process died) and is taken over.
    clock.offsetMs = 120_000;
    const retried = await post(key, body);
    clock.offsetMs = 0;
    expect(retried.statusCode).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
  });

  it('20 concurrent requests with one key create exactly one order; each answer is 201 or 409, never 500', async () => {
    const caller = await atrium.caller();
    const key = freshKey();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => post(key, orderBody(cat), caller.headers)),
    );
    const statuses = responses.map((r) => r.statusCode);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const ids = new Set(responses.filter((r) => r.statusCode === 201).map((r) => r.json().id));
    expect(ids.size).toBe(1);
    // Which requests overlap the first is timing; that exactly one was processed is not.
    const processed = responses.filter((r) => r.statusCode === 201 && !r.headers['idempotent-replayed']);
    expect(processed).toHaveLength(1);
    for (const r of responses.filter((r) => r.statusCode === 201 && r !== processed[0])) {
      expect(r.headers['idempotent-replayed']).toBe('true');
    }
    const owned = await ordersOf(caller.userId);
    expect(owned).toEqual([...ids]);
    for (const r of responses.filter((r) => r.statusCode === 409)) {
      expect(r.json().error).toBe('idempotency_in_progress');
    }
    // Once settled, the key replays.
    const after = await post(key, orderBody(cat), caller.headers);
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(after.json().id).toBe([...ids][0]);
  });

  it('concurrent requests with one key and different bodies never create two orders', async () => {
    const caller = await atrium.caller();
    const key = freshKey();
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post(key, orderBody(cat, { currency: i % 2 ? 'EUR' : 'USD' }), caller.headers),
      ),
    );
    expect(responses.every((r) => [201, 409, 422].includes(r.statusCode))).toBe(true);
    expect((await ordersOf(caller.userId)).length).toBe(1);
  });

  describe('the key itself', () => {
    it.each([
      ['empty', '', 'range_error'],
      ['256 characters', 'k'.repeat(256), 'range_error'],
      ['non-ASCII', 'clé-😀', 'invalid_format'],
      ['a control character', 'a\u0001b', 'invalid_format'],
    ])('%s is 400', async (_name, key, code) => {
      const res = await post(key, orderBody(cat));
      expect(res.statusCode).toBe(400);
      expect(res.json().details[0]).toMatchObject({ field: 'Idempotency-Key', code });
    });

    it('255 printable characters are accepted', async () => {
      const res = await post(`${'k'.repeat(240)}${String(Date.now()).slice(-15)}`, orderBody(cat));
      expect(res.statusCode).toBe(201);
    });
  });
});
