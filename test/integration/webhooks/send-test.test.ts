import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { DomainError } from '../../../src/domain/errors.js';
import { WEBHOOK_COMMANDS } from '../../../src/webhooks/cli.js';
import { webhooksOf } from '../../../src/webhooks/index.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call } from '../../helpers/rest-client.js';
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
    const cli = WEBHOOK_COMMANDS['webhooks send-test']!.run(atrium.services, [
      endpoint.id,
      '--type',
      'payment.failed',
    ]);
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
