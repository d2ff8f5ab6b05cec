import { describe, expect, it } from 'vitest';
import {
  allowedAddresses,
  guardedLookup,
  isNonPublicAddress,
  RefusedAddressError,
} from '../../src/webhooks/address-policy.js';
import { envelopeBody } from '../../src/webhooks/event-types.js';
import { backoffAfter, verdict } from '../../src/webhooks/schedule.js';
import { signatureHeader, signatureOf, signingSecrets } from '../../src/webhooks/signing.js';
import { newEventId } from '../../src/domain/ids.js';
import { createHmac } from 'node:crypto';

describe('retry rules', () => {
  it('waits base × 2^(n-1): attempts at 0, 1, 3, 7, 15 units', () => {
    const starts = [0];
    for (let n = 1; n < 5; n++) starts.push(starts[n - 1]! + backoffAfter(n, 1000));
    expect(starts).toEqual([0, 1000, 3000, 7000, 15000]);
  });

  it.each([
    [200, 1, 'delivered'],
    [204, 3, 'delivered'],
    [302, 1, 'delivered'],
    [399, 1, 'delivered'],
    [400, 1, 'failed'],
    [401, 1, 'failed'],
    [404, 2, 'failed'],
    [499, 1, 'failed'],
    [410, 1, 'failed_and_disable'],
    [408, 1, 'retry'],
    [429, 4, 'retry'],
    [500, 1, 'retry'],
    [503, 4, 'retry'],
    [599, 2, 'retry'],
    [500, 5, 'failed'],
    [429, 5, 'failed'],
  ])('status %i on attempt %i is %s', (status, attempt, expected) => {
    expect(verdict({ kind: 'response', status }, attempt)).toBe(expected);
  });

  it('timeouts and connection errors retry until the fifth attempt; a refused address never does', () => {
    expect(verdict({ kind: 'timeout' }, 1)).toBe('retry');
    expect(verdict({ kind: 'timeout' }, 5)).toBe('failed');
    expect(verdict({ kind: 'connection', message: 'ECONNRESET' }, 4)).toBe('retry');
    expect(verdict({ kind: 'connection', message: 'ECONNRESET' }, 5)).toBe('failed');
    expect(verdict({ kind: 'refused', message: 'private' }, 1)).toBe('failed');
  });
});

describe('signatures', () => {
  it('is HMAC-SHA256 of "<t>.<raw body>" in hex', () => {
    const expected = createHmac('sha256', 'whsec_k').update('1700000000.{"a":1}').digest('hex');
    expect(signatureOf('whsec_k', 1700000000, '{"a":1}')).toBe(expected);
    expect(signatureHeader(['whsec_k'], 1700000000, '{"a":1}')).toBe(`t=1700000000,v1=${expected}`);
  });

  it('signs with the previous secret only inside its overlap', () => {
    const now = new Date('2026-11-23T12:00:00.000Z');
    const endpoint = {
      secret: 'new',
      previous_secret: 'old',
      previous_secret_expires_at: '2026-11-24T11:00:00.000Z',
    };
    expect(signingSecrets(endpoint, now)).toEqual(['new', 'old']);
    expect(
      signingSecrets({ ...endpoint, previous_secret_expires_at: '2026-11-23T11:59:59.999Z' }, now),
    ).toEqual(['new']);
    expect(
      signingSecrets({ ...endpoint, previous_secret: null, previous_secret_expires_at: null }, now),
    ).toEqual(['new']);
  });
});

describe('envelope', () => {
  it('has exactly id, type, created, data, api_version, with the stored data bytes', () => {
    const id = newEventId(Date.UTC(2026, 10, 23));
    expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    const body = envelopeBody({
      id,
      type: 'order.created',
      created: 1700000000,
      data: '{"x":"é"}',
      api_version: '2026-11-28',
    });
    expect(JSON.parse(body)).toEqual({
      id,
      type: 'order.created',
      created: 1700000000,
      data: { x: 'é' },
      api_version: '2026-11-28',
    });
  });

  it('event ids sort by time', () => {
    expect(newEventId(1000) < newEventId(2000)).toBe(true);
  });

  it('event ids made in one millisecond by one process keep their order', () => {
    const now = Date.now() + 60_000;
    const ids = Array.from({ length: 200 }, () => newEventId(now));
    expect(new Set(ids).size).toBe(200);
    expect([...ids].sort()).toEqual(ids);
    for (const id of ids) expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
  });
});

describe('the SSRF address rule', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    '::ffff:127.0.0.1',
    '::ffff:192.168.1.1',
    '64:ff9b::7f00:1',
    '::127.0.0.1', // IPv4-compatible, as the URL parser writes it: ::7f00:1
    '::7f00:1',
    '2002:7f00:1::', // 6to4 of 127.0.0.1
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
    // IANA special-purpose blocks not globally reachable, and embedded forms of non-public IPv4:
    '64:ff9b:1::a00:1', // local-use NAT64 (RFC 8215) of 10.0.0.1
    '64:ff9b:1::808:808', // local-use NAT64: refused whatever it embeds
    '::ffff:0:a00:1', // IPv4-translated (RFC 2765) of 10.0.0.1
    '::ffff:0:808:808', // IPv4-translated: refused whatever it embeds
    '0:0:0:0:0:ffff:a00:1', // IPv4-mapped 10.0.0.1, written out
    '::ffff:a00:1', // IPv4-mapped 10.0.0.1 in hex, as the URL parser writes it
    '64:ff9b::a00:1', // well-known NAT64 of 10.0.0.1
    '64:ff9b::a9fe:a9fe', // well-known NAT64 of 169.254.169.254
    '2001:10::1', // ORCHID (deprecated)
    '2001:2::1', // benchmarking
    '2001:1::4', // IETF protocol assignments, outside the anycast exceptions
    '100::1', // discard-only
    '100:0:0:1::1', // dummy prefix
    '3fff::1', // documentation
    '5f00::1', // segment routing
    '2001:db8::1', // documentation
    'fec0::1', // site-local
    'ff02::1', // multicast
    'fe80::1%eth0', // with a zone
    '192.0.0.8',
    '192.88.99.1', // 6to4 relay anycast
    '198.18.0.1',
    'not-an-address',
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '172.32.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808', // well-known NAT64 of a public address: globally reachable (IANA, RFC 6052)
    '64:ff9b::8.8.8.8',
    '2001:20::1', // ORCHIDv2: globally reachable inside 2001::/23
    '2001:1::1', // PCP anycast
    '2001:4:112::1', // AS112-v6
    '192.0.0.9', // PCP anycast
    '192.0.0.10', // TURN anycast
  ])('%s is public', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });

  it('refuses a name when any of its addresses is private, and allows everything when private targets are allowed', async () => {
    const resolve = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: '10.0.0.1', family: 4 },
    ];
    await expect(allowedAddresses('mixed.test', false, resolve)).rejects.toThrow(/10\.0\.0\.1/);
    await expect(allowedAddresses('mixed.test', true, resolve)).resolves.toHaveLength(2);
  });

  it('hands the socket a NAT64 address of a public host, and refuses one of a private host', async () => {
    const answers: Record<string, string> = {
      'public64.test': '64:ff9b::808:808',
      'private64.test': '64:ff9b::a00:1',
      'local64.test': '64:ff9b:1::a00:1',
      'translated.test': '::ffff:0:a00:1',
      'orchid.test': '2001:10::1',
    };
    const resolve = async (hostname: string) => [{ address: answers[hostname]!, family: 6 }];
    const lookup = guardedLookup(false, resolve);
    const looked = (hostname: string) =>
      new Promise<{ err: Error | null; address: string }>((done) =>
        lookup(hostname, {}, (err, address) => done({ err, address: address as string })),
      );
    expect(await looked('public64.test')).toEqual({ err: null, address: '64:ff9b::808:808' });
    for (const name of ['private64.test', 'local64.test', 'translated.test', 'orchid.test']) {
      const { err } = await looked(name);
      expect(err, name).toBeInstanceOf(RefusedAddressError);
      expect(err!.message).toContain(answers[name]);
    }
  });
});
