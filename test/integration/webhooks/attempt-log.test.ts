import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { until } from '../../helpers/wait.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, createEndpoint, Receiver } from './support.js';

/**
 * Every delivery attempt the worker makes is one info line `webhook attempt` (docs/webhooks.md,
 * Logs): endpoint id, delivery id, event id and type, attempt number, the receiver's status or the
 * kind of failure, duration, and when it is tried next. The endpoint's URL (which may carry a token),
 * its secret and the payload are never in it. Until 2026-11-28 attempts were only counted.
 */
const log = memoryLog('info');
let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium(
    { WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '400' },
    ['api', 'auth', 'worker'],
    { logger: log.logger },
  );
  receiver = await new Receiver().start();
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

describe('webhook attempt log lines', () => {
  it('a timeout, a 503 and a 200: three lines, no URL, token, secret or payload', async () => {
    const token = 'tok_url_s3cr3t_42';
    const path = `/hooks/${token}`;
    // The first attempt is held past WEBHOOK_TIMEOUT_MS, the second answered 503, the third 200.
    receiver.responder = (r, nth) =>
      r.path.startsWith(path)
        ? nth === 1
          ? { status: 200, delayMs: Infinity }
          : { status: nth === 2 ? 503 : 200 }
        : { status: 200 };
    const who = await atrium.caller();
    const endpoint = await createEndpoint(atrium, who.headers, {
      url: receiver.url(`${path}?token=${token}`),
      events: ['order.created'],
    });
    const order = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    expect(order.status).toBe(201);
    const mine = () => log.lines.filter((l) => l.msg === 'webhook attempt' && l.endpointId === endpoint.id);
    await until(() => mine().length === 3, 'three attempt lines', 10_000);
    const lines = mine();
    const [first, second, third] = lines;
    const common = {
      level: 30,
      endpointId: endpoint.id,
      deliveryId: expect.any(String),
      eventId: expect.stringMatching(/^evt_/),
      eventType: 'order.created',
      ms: expect.any(Number),
    };
    expect(first).toMatchObject({ ...common, attempt: 1, error: 'timeout', result: 'retry' });
    expect(second).toMatchObject({ ...common, attempt: 2, status: 503, result: 'retry' });
    expect(third).toMatchObject({
      ...common,
      attempt: 3,
      status: 200,
      result: 'delivered',
      nextAttemptAt: null,
    });
    for (const retried of [first!, second!]) {
      expect(Date.parse(retried.nextAttemptAt as string)).toBeGreaterThan(retried.time as number);
    }
    expect(new Set(lines.map((l) => l.deliveryId)).size).toBe(1);
    const text = JSON.stringify(lines);
    expect(text).not.toContain(token);
    expect(text).not.toContain('127.0.0.1');
    expect(text).not.toContain(endpoint.secret);
    expect(text).not.toContain((order.body as { id: string }).id);
  });
});
