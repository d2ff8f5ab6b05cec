import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNonPublicAddress, type Resolver } from '../../../src/webhooks/address-policy.js';
import { WebhookSender } from '../../../src/webhooks/sender.js';
import { newSigningSecret } from '../../../src/webhooks/signing.js';
import { newId } from '../../../src/domain/ids.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { makeCatalogue, orderBody, type Catalogue } from '../orders/fixtures.js';
import { api, attemptsOf, deliveriesWhen, Receiver } from './support.js';

/**
 * The SSRF rule in production mode (WEBHOOK_ALLOW_PRIVATE=false) with the machine's own resolver:
 * no resolver is injected anywhere, so what is refused is what getaddrinfo answers (`localhost` and
 * /etc/hosts), through the worker's real socket. ssrf.test.ts covers rebinding with a resolver the
 * test controls; this file covers the path production runs.
 */
const log = memoryLog('info');
let atrium: TestAtrium;
let receiver: Receiver;
let catalogue: Catalogue;

beforeAll(async () => {
  atrium = await startTestAtrium(
    { WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_BACKOFF_BASE_MS: '50', WEBHOOK_TIMEOUT_MS: '2000' },
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

const port = () => new URL(receiver.url('/')).port;

/** Names in /etc/hosts whose every answer is non-public here (read, never edited). */
async function loopbackNamesOfThisMachine(): Promise<string[]> {
  let text = '';
  try {
    text = readFileSync('/etc/hosts', 'utf8');
  } catch {
    return [];
  }
  const names = new Set(
    text
      .split('\n')
      .map((line) => line.replace(/#.*/, '').trim().split(/\s+/))
      .flatMap(([, ...aliases]) => aliases)
      .filter((n) => /^[a-z0-9.-]+$/i.test(n) && !/^[\d.]+$/.test(n)),
  );
  const found: string[] = [];
  for (const name of names) {
    const answers = await lookup(name, { all: true }).catch(() => []);
    if (answers.length > 0 && answers.every((a) => isNonPublicAddress(a.address))) found.push(name);
  }
  return found;
}

async function expectRefusedAtCreation(url: string) {
  const who = await atrium.caller();
  const res = await api(atrium, 'POST', '/api/v2/webhook_endpoints', who.headers, { url });
  expect(res.status, url).toBe(400);
  expect(res.body, url).toMatchObject({
    error: 'validation_error',
    message: expect.any(String),
    details: [{ field: 'url', message: expect.any(String), code: 'private_address' }],
  });
  return res.body as { details: Array<{ message: string }> };
}

describe('at creation, through the system resolver', () => {
  // Not `localhost.`: getaddrinfo sends a fully qualified name to DNS rather than /etc/hosts, so
  // whether it resolves at all depends on the machine's name server.
  it.each(['localhost', 'LOCALHOST'])(
    'refuses http://%s:PORT/ (the name resolves to loopback)',
    async (host) => {
      const body = await expectRefusedAtCreation(`http://${host}:${port()}/hook`);
      expect(body.details[0]!.message).toMatch(/resolves to (127\.|::1)/);
    },
  );

  it('refuses every name of /etc/hosts that resolves only to loopback or private addresses', async () => {
    const names = await loopbackNamesOfThisMachine();
    // `localhost` at least: a machine without it has no loopback name to test with.
    expect(names).toContain('localhost');
    for (const name of names) await expectRefusedAtCreation(`http://${name}/hook`);
  });

  // The URL parser turns every IPv4 spelling into the dotted quad before the rule sees it, and
  // every IPv6 spelling into its compressed form; the rule is then applied to the literal.
  it.each([
    'http://2130706433/', // decimal 127.0.0.1
    'http://017700000001/', // octal
    'http://0x7f000001/', // hexadecimal
    'http://0x7f.1/', // mixed parts
    'http://0177.0.0.1/',
    'http://127.1/',
    'http://0/', // 0.0.0.0
    'http://0.0.0.0/',
    'http://167772161/', // 10.0.0.1
    'http://0xa9.0xfe.0xa9.0xfe/', // 169.254.169.254
    'http://127.0.0.1./', // trailing dot
    'http://[::]/',
    'http://[::1]/',
    'http://[0:0:0:0:0:0:0:1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[0:0:0:0:0:ffff:127.0.0.1]/',
    'http://[::ffff:0.0.0.0]/',
    'http://[::ffff:169.254.169.254]/',
    'http://[::127.0.0.1]/', // IPv4-compatible
  ])('refuses the literal %s', async (url) => {
    await expectRefusedAtCreation(url);
  });
});

describe('at delivery, through the system resolver and the worker’s socket', () => {
  /**
   * An endpoint row written straight through the store, as if it had been registered while its
   * name resolved to a public address: by delivery time the name answers loopback (rebinding).
   */
  async function storedEndpoint(url: string) {
    const who = await atrium.caller();
    const now = new Date();
    const row = {
      id: newId('whe', now.getTime()),
      user_id: who.userId,
      url,
      events: JSON.stringify(['*']),
      secret: newSigningSecret(),
      disabled_at: null,
      disabled_reason: null,
      previous_secret: null,
      previous_secret_expires_at: null,
      created_at: now.toISOString(),
      updated_at: now.toISOString(),
    };
    await atrium.services.store.db.insertInto('webhook_endpoints').values(row).execute();
    return { who, endpoint: row };
  }

  it.each(['localhost', 'LOCALHOST'])(
    'http://%s:PORT/ resolving to loopback at delivery: nothing is sent, the attempt fails as refused',
    async (host) => {
      const path = `/rebound-${host}`;
      const { who, endpoint } = await storedEndpoint(`http://${host}:${port()}${path}`);
      const order = await api(atrium, 'POST', '/api/v2/orders', who.headers, orderBody(catalogue));
      expect(order.status).toBe(201);

      const [delivery] = await deliveriesWhen(
        atrium,
        endpoint.id,
        who.headers,
        ([d]) => d !== undefined && d.status !== 'pending',
        'the refused attempt written',
      );
      expect(delivery).toMatchObject({ status: 'failed', attempt_count: 1, last_status_code: null });
      const attempts = await attemptsOf(atrium, endpoint.id, who.headers);
      expect(attempts).toHaveLength(1);
      expect(attempts[0]).toMatchObject({ attempt: 1, status_code: null });
      expect(attempts[0]!.error).toBe(
        `refused: ${host.toLowerCase()} resolves to 127.0.0.1, a loopback, private or link-local address`,
      );
      // The receiver listens on 127.0.0.1 at exactly this port: had the socket connected, it would
      // have the request (and the signature made with the secret).
      expect(receiver.at(path)).toHaveLength(0);
      expect(receiver.received.filter((r) => r.path.startsWith('/rebound'))).toEqual([]);
      // The secret is in no record the owner reads and in no log line.
      const everything = JSON.stringify([delivery, attempts, log.lines]);
      expect(everything).not.toContain(endpoint.secret);
      const line = log.lines.find((l) => l.endpointId === endpoint.id);
      expect(line).toMatchObject({ attempt: 1, result: 'failed', error: 'refused' });
    },
  );
});

describe('the socket’s lookup is the only resolution', () => {
  /**
   * The check holds only if the socket connects to the address that was checked. A name that only
   * the sender's resolver knows, and that it answers once: the request arrives exactly when the
   * socket took its address from that one answer (a check that resolved on its own, and a socket
   * that then resolved again through the system, would fail to find the name or ask twice).
   */
  it('connects to the address the guarded lookup returned, asking once', async () => {
    const asked: string[] = [];
    const resolve: Resolver = async (hostname) => {
      asked.push(hostname);
      if (asked.length > 1) throw new Error(`asked again for ${hostname}`);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    // Private targets allowed here only so that the answer can be this machine's receiver.
    const sender = new WebhookSender({ timeoutMs: 2_000, allowPrivate: true, resolve });
    try {
      const path = '/only-the-hook';
      const outcome = await sender.send({
        url: `http://only-the-hook.invalid:${port()}${path}`,
        body: '{}',
        headers: {},
      });
      expect(outcome.result).toEqual({ kind: 'response', status: 200 });
      expect(asked).toEqual(['only-the-hook.invalid']);
      expect(receiver.at(path)).toHaveLength(1);
    } finally {
      sender.close();
    }
  });
});
