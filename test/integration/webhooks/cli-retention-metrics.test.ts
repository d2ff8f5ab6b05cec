import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createAtrium, createServices } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import { Outbox } from '../../../src/webhooks/outbox.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { runCli } from '../../helpers/cli.js';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { makeCatalogue, orderBody } from '../orders/fixtures.js';
import { api, createEndpoint, Receiver, verifyWithStripe } from './support.js';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await new Receiver().start();
});
afterAll(async () => {
  await receiver?.stop();
});

describe('atrium webhooks (command line)', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await sharedDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('create, list, send-test (delivered by the worker), delete; bad input exits 1 or 2', async () => {
    const env = { DATABASE_URL: database.url };
    // Each CLI run is a fresh process; the user comes from the same services the CLI builds.
    const services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }));
    const userId = (await services.core.users.create({ handle: 'hookcli', email: 'hookcli@example.com' })).id;
    await closeServices(services);

    const created = await runCli(
      [
        'webhooks',
        'create',
        '--url',
        receiver.url('/cli'),
        '--events',
        'order.created,payment.failed',
        '--user',
        userId,
      ],
      env,
    );
    expect(created.code).toBe(0);
    const endpoint = JSON.parse(created.stdout) as {
      id: string;
      url: string;
      events: string[];
      secret: string;
    };
    expect(Object.keys(endpoint).sort()).toEqual(['events', 'id', 'secret', 'url']);
    expect(endpoint.events).toEqual(['order.created', 'payment.failed']);

    const listed = await runCli(['webhooks', 'list', '--user', userId], env);
    expect(listed.code).toBe(0);
    const list = JSON.parse(listed.stdout) as { data: Array<Record<string, unknown>> };
    expect(list.data.map((e) => e.id)).toEqual([endpoint.id]);
    expect(listed.stdout).not.toContain(endpoint.secret);

    const sent = await runCli(['webhooks', 'send-test', endpoint.id, '--type', 'payment.failed'], env);
    expect(sent.code).toBe(0);
    const queued = JSON.parse(sent.stdout) as {
      id: string;
      type: string;
      created: number;
      api_version: string;
    };
    expect(queued).toMatchObject({ type: 'payment.failed', api_version: '2026-11-28' });
    expect(queued.id).toMatch(/^evt_[0-9a-f]+$/);

    const badType = await runCli(['webhooks', 'send-test', endpoint.id, '--type', 'order.shipped'], env);
    expect(badType.code).toBe(1);
    expect(JSON.parse(badType.stderr)).toMatchObject({ error: 'validation_error' });
    const noUser = await runCli(['webhooks', 'create', '--url', receiver.url('/cli')], env);
    expect(noUser.code).toBe(2);
    // An --events with no name in it is a mistake, not "every event".
    for (const events of [',', '', ' , ']) {
      const none = await runCli(
        ['webhooks', 'create', '--url', receiver.url('/cli'), '--events', events, '--user', userId],
        env,
      );
      expect(none.code, JSON.stringify(events)).toBe(2);
      expect(none.stderr).toContain('--events');
    }

    // The event the CLI queued waits in the outbox until a worker runs.
    const atrium = await createAtrium(parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url }), [
      'worker',
    ]);
    try {
      await receiver.until(() => receiver.at('/cli').length >= 1);
      const got = receiver.at('/cli')[0]!;
      expect(verifyWithStripe(got, endpoint.secret)).toMatchObject({ id: queued.id, type: 'payment.failed' });
      expect(JSON.parse(got.raw)).toEqual(queued);
    } finally {
      await atrium.close();
    }

    const deleted = await runCli(['webhooks', 'delete', endpoint.id], env);
    expect(deleted.code).toBe(0);
    expect(JSON.parse(deleted.stdout)).toEqual({ id: endpoint.id, deleted: true });
  }, 180_000);
});

describe('retention and metrics', () => {
  let atrium: TestAtrium;
  beforeAll(async () => {
    atrium = await startTestAtrium({ WEBHOOK_BACKOFF_BASE_MS: '60000' }, ['api', 'auth', 'worker']);
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('purges finished events (delivered and failed) with their attempts, keeps pending ones; /metrics shows the worker', async () => {
    const catalogue = await makeCatalogue(atrium);
    const who = await atrium.caller();
    receiver.responder = (r) => ({ status: r.path === '/ret-ok' ? 200 : r.path === '/ret-bad' ? 400 : 500 });
    for (const path of ['/ret-ok', '/ret-bad', '/ret-retry']) {
      await createEndpoint(atrium, who.headers, { url: receiver.url(path), events: ['order.created'] });
    }
    const noEndpoints = await atrium.caller();
    await api(atrium, 'POST', '/api/v2/orders', noEndpoints.headers, orderBody(catalogue));
    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    await receiver.until(() =>
      ['/ret-ok', '/ret-bad', '/ret-retry'].every((p) => receiver.at(p).length >= 1),
    );
    await new Promise((r) => setTimeout(r, 200));
    const db = atrium.services.store.db;
    const statuses = (await db.selectFrom('webhook_deliveries').select('status').execute())
      .map((r) => r.status)
      .sort();
    expect(statuses).toEqual(['delivered', 'failed', 'pending']);

    const metrics = await atrium.http!.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/atrium_webhook_deliveries_total\{outcome="delivered"\} 1\b/);
    expect(metrics.body).toMatch(/atrium_webhook_deliveries_total\{outcome="failed"\} 1\b/);
    expect(metrics.body).toMatch(/atrium_webhook_attempt_failures_total\{reason="http_5xx"\} 1\b/);
    expect(metrics.body).toMatch(/atrium_webhook_outbox_lag_seconds_count 3\b/);
    expect(metrics.body).toMatch(/atrium_webhook_pending_deliveries 1\b/);

    const outbox = new Outbox(atrium.services.store);
    const future = new Date(Date.now() + 1000);
    // The user's event still has a pending delivery: only the event nobody subscribed to goes.
    expect(await outbox.purge(future)).toBe(1);
    expect(await db.selectFrom('events').select('id').execute()).toHaveLength(1);
    await db.updateTable('webhook_deliveries').set({ status: 'failed', next_attempt_at: null }).execute();
    expect(await outbox.purge(new Date(Date.now() - 60_000))).toBe(0); // not old enough yet
    expect(await outbox.purge(future)).toBe(1);
    expect(await db.selectFrom('events').select('id').execute()).toHaveLength(0);
    expect(await db.selectFrom('webhook_deliveries').select('id').execute()).toHaveLength(0);
    expect(await db.selectFrom('delivery_attempts').select('id').execute()).toHaveLength(0);
  });
});
