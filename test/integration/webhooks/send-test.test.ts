import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { DomainError } from '../../../src/domain/errors.js';
import { WEBHOOK_COMMANDS } from '../../../src/webhooks/cli.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call } from '../../helpers/rest-client.js';
import { makeCatalogue, orderBody } from '../orders/fixtures.js';
import { Receiver, verifyWithStripe } from './support.js';

/** `send-test` (REST `POST .../test` and `atrium webhooks send-test`), over a real socket. */
let atrium: TestAtrium;
let base: string;
let receiver: Receiver;

beforeAll(async () => {
  atrium = await startTestAtrium({ WEBHOOK_BACKOFF_BASE_MS: '50' }, ['api', 'auth', 'worker']);
  base = (await atrium.listen()).httpUrl!;
  receiver = await new Receiver().start();
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

const BASE = '/api/v2/webhook_endpoints';

async function endpointFor(headers: Record<string, string>, path: string) {
  const created = await call(base, 'POST', BASE, { headers, json: { url: receiver.url(path) } });
  expect(created.status).toBe(201);
  return created.body as { id: string; secret: string };
}

/** Events ever queued for one endpoint, read from the outbox itself. */
async function eventsFor(endpointId: string): Promise<number> {
  const rows = await atrium.services.store.db
    .selectFrom('events')
    .select('id')
    .where('target_endpoint_id', '=', endpointId)
    .execute();
  return rows.length;
}

describe('send-test on a disabled endpoint', () => {
  const DISABLED = 'The endpoint is disabled; enable it (PATCH enabled: true) before re-sending.';

  it('is 409 conflict, as a re-send is, and queues nothing; once re-enabled a test is delivered', async () => {
    const who = await atrium.caller();
    const endpoint = await endpointFor(who.headers, '/disabled-test');
    const path = `${BASE}/${endpoint.id}`;
    const off = await call(base, 'PATCH', path, { headers: who.headers, json: { enabled: false } });
    expect(off.body).toMatchObject({ status: 'disabled' });

    const refused = await call(base, 'POST', `${path}/test`, {
      headers: who.headers,
      json: { type: 'order.created' },
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: 'conflict', message: DISABLED });
    expect(await eventsFor(endpoint.id)).toBe(0);

    // The command line calls the same rule.
    const cli = WEBHOOK_COMMANDS['webhooks send-test']!.prepare([endpoint.id, '--type', 'payment.failed'])(
      atrium.services,
    );
    await expect(cli).rejects.toBeInstanceOf(DomainError);
    await expect(cli).rejects.toMatchObject({ code: 'conflict', message: DISABLED });
    expect(await eventsFor(endpoint.id)).toBe(0);

    await call(base, 'PATCH', path, { headers: who.headers, json: { enabled: true } });
    const sent = await call(base, 'POST', `${path}/test`, {
      headers: who.headers,
      json: { type: 'payment.failed' },
    });
    expect(sent.status).toBe(202);
    await receiver.until(() => receiver.at('/disabled-test').length === 1);
    const got = receiver.at('/disabled-test')[0]!;
    expect(verifyWithStripe(got, endpoint.secret)).toMatchObject({
      id: sent.body!.id,
      type: 'payment.failed',
    });
  });

  it('the core refuses it for admins and the system too', async () => {
    const who = await atrium.caller();
    const endpoint = await endpointFor(who.headers, '/disabled-core');
    const { endpoints } = webhooksOf(atrium.services);
    await endpoints.update(SYSTEM_ACTOR, endpoint.id, { enabled: false });
    await expect(endpoints.sendTest(SYSTEM_ACTOR, endpoint.id, 'user.updated')).rejects.toMatchObject({
      code: 'conflict',
    });
    expect(await eventsFor(endpoint.id)).toBe(0);
  });
});

/** The structure of a JSON value: object keys (sorted) with their structures, an array's first item. */
function skeleton(value: unknown): unknown {
  if (Array.isArray(value)) return [value.length === 0 ? 'empty' : skeleton(value[0])];
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, skeleton((value as Record<string, unknown>)[k])]),
    );
  }
  return 'value';
}

/** The `data` of the newest real (not send-test) event of `type` owned by `ownerId`. */
async function realEventData(ownerId: string, type: string): Promise<Record<string, unknown>> {
  const row = await atrium.services.store.db
    .selectFrom('events')
    .select('data')
    .where('owner_id', '=', ownerId)
    .where('type', '=', type)
    .where('target_endpoint_id', 'is', null)
    .orderBy('id', 'desc')
    .executeTakeFirstOrThrow();
  return JSON.parse(row.data) as Record<string, unknown>;
}

describe('send-test samples are whole instances of their type’s documented data', () => {
  let who: Awaited<ReturnType<TestAtrium['caller']>>;
  let endpointId: string;
  let realOrder: Record<string, unknown>;

  beforeAll(async () => {
    who = await atrium.caller();
    endpointId = (await endpointFor(who.headers, '/samples')).id;
    const catalogue = await makeCatalogue(atrium);
    const created = await call(base, 'POST', '/api/v2/orders', {
      headers: who.headers,
      json: orderBody(catalogue),
    });
    expect(created.status).toBe(201);
    realOrder = created.body!;
  });

  async function sample(type: string): Promise<Record<string, unknown>> {
    const sent = await call(base, 'POST', `${BASE}/${endpointId}/test`, {
      headers: who.headers,
      json: { type },
    });
    expect(sent.status).toBe(202);
    const data = (sent.body as { data: Record<string, unknown> }).data;
    // What is delivered is what was answered.
    await receiver.until(() => receiver.at('/samples').some((r) => r.eventId === sent.body!.id));
    const got = receiver.at('/samples').find((r) => r.eventId === sent.body!.id)!;
    expect((JSON.parse(got.raw) as { data: unknown }).data).toEqual(data);
    return data;
  }

  it.each(['order.created', 'order.updated', 'order.cancelled', 'order.refunded'])(
    '%s: the v2 order, every field (as the REST body and a real event show it), marked test: true',
    async (type) => {
      const data = await sample(type);
      expect(data.test).toBe(true);
      const { test: _marker, ...order } = data;
      expect(skeleton(order)).toEqual(skeleton(realOrder));
      expect(skeleton(order)).toEqual(skeleton(await realEventData(who.userId, 'order.created')));
      expect(order.owner_id).toBe(who.userId);
      expect(order.id).toMatch(/^ord_[0-9a-z]{26}$/);
      const items = order.items as Array<{ quantity: number; unit_price_cents: number }>;
      const subtotal = items.reduce((sum, i) => sum + i.quantity * i.unit_price_cents, 0);
      expect(order).toMatchObject({
        subtotal_cents: subtotal,
        amount_cents: subtotal - Number(order.discount_cents),
      });
      const status = {
        'order.created': 'PENDING',
        'order.updated': 'PROCESSING',
        'order.cancelled': 'CANCELLED',
        'order.refunded': 'SHIPPED',
      }[type];
      expect(order.status).toBe(status);
      if (type === 'order.refunded') {
        expect(order.refunded).toBe(true);
        // Webhook timestamps are integer Unix seconds (REST's are ISO 8601 strings).
        expect(Number.isInteger(order.refunded_at)).toBe(true);
        expect(Math.abs(Number(order.refunded_at) - Date.now() / 1000)).toBeLessThan(600);
      } else {
        expect(order).toMatchObject({ refunded: false, refunded_at: null });
      }
    },
  );

  it('timestamps inside the data of a real event are integer Unix seconds; REST shows the same times as ISO strings', async () => {
    const real = await realEventData(who.userId, 'order.created');
    expect(real.id).toBe(realOrder.id);
    const seconds = (iso: unknown) => Math.floor(Date.parse(String(iso)) / 1000);
    expect(real.created_at).toBe(seconds(realOrder.created_at));
    expect(real.updated_at).toBe(seconds(realOrder.updated_at));
    expect(real.refunded_at).toBeNull();
    expect(realOrder.created_at).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/));
    // What the receiver got is the stored text: no ISO time anywhere in a delivered body.
    const delivered = receiver.at('/samples').map((r) => r.raw);
    expect(delivered.length).toBeGreaterThan(0);
    for (const raw of delivered) expect(raw).not.toMatch(/"\d{4}-\d\d-\d\dT\d\d:\d\d/);
  });

  it('user.updated: { object: the user, changed: [fields] } as a real change writes it, marked test: true', async () => {
    const admin = await atrium.caller({ role: 'admin' });
    const renamed = await call(base, 'PATCH', `/v1/users/${who.userId}`, {
      headers: admin.headers,
      json: { name: 'Grace Hopper' },
    });
    expect(renamed.status).toBe(200);
    const real = await realEventData(who.userId, 'user.updated');

    const data = await sample('user.updated');
    expect(data.test).toBe(true);
    const { test: _marker, ...rest } = data;
    expect(skeleton(rest)).toEqual(skeleton(real));
    const object = rest.object as Record<string, unknown>;
    expect(object.id).toMatch(/^usr_[0-9a-z]{26}$/);
    expect(object.id).not.toBe(who.userId);
    expect(object.organization_id).toMatch(/^org_[0-9a-z]{26}$/);
    expect(rest.changed).toEqual(['name']);
    // The user's created_at in Unix seconds, in the real event and in the sample alike.
    const renamedAt = Math.floor(
      Date.parse(String((renamed.body as { created_at: string }).created_at)) / 1000,
    );
    expect((real.object as Record<string, unknown>).created_at).toBe(renamedAt);
    expect(Number.isInteger(object.created_at)).toBe(true);
  });
});
