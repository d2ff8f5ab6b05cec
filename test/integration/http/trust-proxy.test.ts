import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CLIENT_AUTH_FAILURES } from '../../../src/oauth/brute-force.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';

const PER_ADDRESS = CLIENT_AUTH_FAILURES.perAddress.limit;

/**
 * TRUST_PROXY over a real socket (the test talks to 127.0.0.1, so the peer is loopback): the
 * per-address failure budget of client authentication, and the access log, must see the client a
 * trusted proxy names, and nothing a peer that is not a trusted proxy claims.
 */
describe('TRUST_PROXY', () => {
  let atrium: TestAtrium | undefined;
  let lines: Record<string, unknown>[] = [];

  afterEach(async () => {
    await atrium?.stop();
    atrium = undefined;
  });

  async function start(trustProxy?: string): Promise<string> {
    lines = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
        done();
      },
    });
    atrium = await startTestAtrium(trustProxy === undefined ? {} : { TRUST_PROXY: trustProxy }, undefined, {
      logger: pino({ level: 'info' }, sink),
    });
    return (await atrium.listen()).httpUrl!;
  }

  /** A failed client authentication, under a fresh client id so only the address budget fills. */
  async function failClientAuth(base: string, forwardedFor?: string): Promise<number> {
    const id = `cli_${randomBytes(8).toString('hex')}`;
    const res = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${id}:wrong`).toString('base64')}`,
        ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}),
      },
      body: 'grant_type=client_credentials',
    });
    await res.arrayBuffer();
    return res.status;
  }

  async function spendBudget(base: string, forwardedFor: string): Promise<void> {
    for (let i = 0; i < PER_ADDRESS; i += 1) expect(await failClientAuth(base, forwardedFor)).toBe(401);
  }

  const loggedIps = () => lines.filter((l) => l.msg === 'request').map((l) => l.ip);

  it('is off by default: a forged X-Forwarded-For changes neither the address budget nor the log', async () => {
    const base = await start();
    await spendBudget(base, '203.0.113.1');
    // Another "client" by the header, the same peer in truth: the budget is spent.
    expect(await failClientAuth(base, '203.0.113.2')).toBe(429);
    expect(await failClientAuth(base)).toBe(429);
    expect(new Set(loggedIps())).toEqual(new Set(['127.0.0.1']));
  });

  it('ignores the header from a peer that is not a listed proxy', async () => {
    const base = await start('10.0.0.0/8, 192.168.1.7');
    await spendBudget(base, '203.0.113.1');
    expect(await failClientAuth(base, '203.0.113.2')).toBe(429);
    expect(new Set(loggedIps())).toEqual(new Set(['127.0.0.1']));
  });

  it('believes a listed proxy: each forwarded client has its own budget and is the logged address', async () => {
    const base = await start('127.0.0.1');
    await spendBudget(base, '203.0.113.1');
    expect(await failClientAuth(base, '203.0.113.1')).toBe(429);
    expect(await failClientAuth(base, '203.0.113.2')).toBe(401);
    // The proxy's own requests are the proxy's.
    expect(await failClientAuth(base)).toBe(401);
    // A client that forges a hop in front of the proxy is still known by the address the proxy saw.
    expect(await failClientAuth(base, '198.51.100.9, 203.0.113.1')).toBe(429);
    const ips = loggedIps();
    expect(ips.filter((ip) => ip === '203.0.113.1')).toHaveLength(PER_ADDRESS + 2);
    expect(ips.filter((ip) => ip === '203.0.113.2')).toHaveLength(1);
    expect(ips).not.toContain('198.51.100.9');
  });

  it('takes named ranges (loopback) and a hop count', async () => {
    let base = await start('loopback');
    expect(await failClientAuth(base, '203.0.113.5')).toBe(401);
    expect(loggedIps()).toEqual(['203.0.113.5']);
    await atrium!.stop();

    base = await start('1');
    // One hop is trusted: the address the proxy appended, never what the client wrote before it.
    expect(await failClientAuth(base, '198.51.100.9, 203.0.113.6')).toBe(401);
    expect(loggedIps()).toEqual(['203.0.113.6']);
  });
});
