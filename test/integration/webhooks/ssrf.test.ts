import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebhookWorker } from '../../../src/webhooks/index.js';
import type { Resolver } from '../../../src/webhooks/address-policy.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, attemptsOf, deliveriesOf, Receiver } from './support.js';

/**
 * The SSRF rule in production mode (WEBHOOK_ALLOW_PRIVATE=false): refused at creation, and again
 * at delivery time, where the address checked is the one connected to (DNS rebinding).
 */
let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;

/** A name server under the test's control: public at creation, loopback by delivery time. */
let rebound = false;
/** Names that answer a public address until `rebound`, then the address given here. */
const reboundTo = new Map<string, string>();
const resolver: Resolver = async (hostname) => {
  const later = reboundTo.get(hostname);
  if (later !== undefined) {
    return rebound
      ? [{ address: later, family: later.includes(':') ? 6 : 4 }]
      : [{ address: '93.184.216.34', family: 4 }];
  }
  if (hostname === 'hooks.rebind.test')
    return [{ address: rebound ? '127.0.0.1' : '93.184.216.34', family: 4 }];
  if (hostname === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

beforeAll(async () => {
  atrium = await startTestAtrium({ WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_BACKOFF_BASE_MS: '50' }, [
    'api',
    'auth',
  ]);
  await startWebhookWorker(atrium.services, { resolve: resolver });
  receiver = await new Receiver().start();
  catalogue = await makeCatalogue(atrium);
});

afterAll(async () => {
  await atrium?.stop();
  await receiver?.stop();
});

describe('at creation', () => {
  it.each([
    'http://127.0.0.1:8080/hook',
    'http://127.1.2.3/hook',
    'http://localhost/hook',
    'http://10.0.0.5/hook',
    'http://172.16.3.4/hook',
    'http://192.168.1.1/hook',
    'http://169.254.169.254/latest/meta-data',
    'http://100.64.0.1/hook',
    'http://0.0.0.0/hook',
    'http://[::1]/hook',
    'http://[fe80::1]/hook',
    'http://[fd00::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://[::ffff:10.0.0.1]/hook',
    'http://[64:ff9b:1::a00:1]/', // local-use NAT64 (RFC 8215) of 10.0.0.1
    'http://[::ffff:0:a00:1]/', // IPv4-translated (RFC 2765) of 10.0.0.1
    'http://[2001:10::1]/', // ORCHID: not globally reachable
    'http://[64:ff9b::a00:1]/', // well-known NAT64 of 10.0.0.1
  ])('refuses %s (private_address)', async (url) => {
    const who = await atrium.caller();
    const res = await api(atrium, 'POST', '/api/v2/webhook_endpoints', who.headers, { url });
    // localhost resolves through the system resolver here: endpoints check with the default one.
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error: 'validation_error',
      details: [{ field: 'url', code: 'private_address' }],
    });
  });

  it('accepts the well-known NAT64 form of a public address (http://[64:ff9b::808:808]/)', async () => {
    const who = await atrium.caller();
    const res = await api(atrium, 'POST', '/api/v2/webhook_endpoints', who.headers, {
      url: 'http://[64:ff9b::808:808]/',
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ url: 'http://[64:ff9b::808:808]/' });
  });

  it('refuses the same URLs on update', async () => {
    const who = await atrium.caller();
    const { WebhookEndpoints } = await import('../../../src/webhooks/endpoints.js');
    const endpoints = new WebhookEndpoints(atrium.services.deps, { allowPrivate: false, resolve: resolver });
    const ep = await endpoints.create(
      { id: who.userId, kind: 'user', role: 'member' },
      {
        url: 'https://hooks.rebind.test/in',
      },
    );
    const res = await api(atrium, 'PATCH', `/api/v2/webhook_endpoints/${ep.id}`, who.headers, {
      url: 'http://10.1.1.1/x',
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ details: [{ field: 'url', code: 'private_address' }] });
  });
});

describe('at delivery time', () => {
  it('a name that resolved publicly at creation and to loopback at delivery is refused, nothing is sent', async () => {
    const who = await atrium.caller();
    const { WebhookEndpoints } = await import('../../../src/webhooks/endpoints.js');
    const endpoints = new WebhookEndpoints(atrium.services.deps, { allowPrivate: false, resolve: resolver });
    const port = new URL(receiver.url('/')).port;
    rebound = false;
    const ep = await endpoints.create(
      { id: who.userId, kind: 'user', role: 'member' },
      {
        url: `http://hooks.rebind.test:${port}/rebind`,
      },
    );
    rebound = true;
    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    const attempts = await waitForAttempts(ep.id, who.headers, 1);
    expect(attempts[0]).toMatchObject({ attempt: 1, status_code: null });
    expect(attempts[0]!.error).toMatch(/^refused: hooks\.rebind\.test resolves to 127\.0\.0\.1/);
    expect(await deliveriesOf(atrium, ep.id, who.headers)).toMatchObject([
      { status: 'failed', attempt_count: 1 },
    ]);
    expect(receiver.at('/rebind')).toHaveLength(0);
  });

  it('an endpoint stored while private targets were allowed is refused once they are not', async () => {
    const who = await atrium.caller();
    // Stored by the endpoint rules of a development process (WEBHOOK_ALLOW_PRIVATE=true), on the
    // same database: the row is whatever creation writes, not a copy of it kept in this test.
    const { WebhookEndpoints } = await import('../../../src/webhooks/endpoints.js');
    const development = new WebhookEndpoints(atrium.services.deps, { allowPrivate: true });
    const { id } = await development.create(
      { id: who.userId, kind: 'user', role: 'member' },
      { url: receiver.url('/literal') },
    );
    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    const attempts = await waitForAttempts(id, who.headers, 1);
    expect(attempts[0]!.error).toMatch(/^refused: 127\.0\.0\.1 is a loopback, private or link-local address/);
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.at('/literal')).toHaveLength(0);
  });
});

describe('IPv6 forms at delivery time', () => {
  const forms = [
    ['64:ff9b:1::a00:1', 'local-use NAT64 of 10.0.0.1'],
    ['::ffff:0:a00:1', 'IPv4-translated 10.0.0.1'],
    ['2001:10::1', 'ORCHID'],
    ['64:ff9b::a00:1', 'well-known NAT64 of 10.0.0.1'],
  ] as const;

  it.each(forms)('a name that answers %s (%s) at delivery is refused, nothing is sent', async (address) => {
    const who = await atrium.caller();
    const { WebhookEndpoints } = await import('../../../src/webhooks/endpoints.js');
    const endpoints = new WebhookEndpoints(atrium.services.deps, { allowPrivate: false, resolve: resolver });
    const hostname = `r${reboundTo.size}.rebind.test`;
    reboundTo.set(hostname, address);
    rebound = false;
    const ep = await endpoints.create(
      { id: who.userId, kind: 'user', role: 'member' },
      { url: `http://${hostname}/in` },
    );
    rebound = true;
    await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
    const attempts = await waitForAttempts(ep.id, who.headers, 1);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, status_code: null });
    expect(attempts[0]!.error).toBe(
      `refused: ${hostname} resolves to ${address}, a loopback, private or link-local address`,
    );
    expect(await deliveriesOf(atrium, ep.id, who.headers)).toMatchObject([
      { status: 'failed', attempt_count: 1 },
    ]);
  });

  it.each(forms)(
    'the literal http://[%s]/ stored while private targets were allowed is refused (%s)',
    async (address) => {
      const who = await atrium.caller();
      const { WebhookEndpoints } = await import('../../../src/webhooks/endpoints.js');
      const development = new WebhookEndpoints(atrium.services.deps, { allowPrivate: true });
      const { id } = await development.create(
        { id: who.userId, kind: 'user', role: 'member' },
        { url: `http://[${address}]/in` },
      );
      await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
      const attempts = await waitForAttempts(id, who.headers, 1);
      expect(attempts).toHaveLength(1);
      expect(attempts[0]!.error).toBe(`refused: ${address} is a loopback, private or link-local address`);
      expect(await deliveriesOf(atrium, id, who.headers)).toMatchObject([
        { status: 'failed', attempt_count: 1 },
      ]);
    },
  );
});

async function waitForAttempts(endpointId: string, headers: Record<string, string>, n: number) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const data = await attemptsOf(atrium, endpointId, headers);
    if (data.length >= n) {
      await new Promise((r) => setTimeout(r, 100));
      return data;
    }
    if (Date.now() > deadline) throw new Error(`no ${n} attempts for ${endpointId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
