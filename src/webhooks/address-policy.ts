import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * The SSRF rule. With WEBHOOK_ALLOW_PRIVATE=false a webhook may only reach public addresses: the
 * target is refused at creation when it resolves to loopback, private, link-local or other
 * non-public space, and again at every delivery, where the address checked is the address the
 * socket connects to (so a DNS answer that changes between check and use cannot slip through).
 */
const BLOCKED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved and broadcast
] as const) {
  BLOCKED.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 96], // unspecified, loopback, and IPv4-compatible (::a.b.c.d, deprecated) addresses
  ['2001::', 32], // Teredo: tunnels to an IPv4 address it embeds
  ['2002::', 16], // 6to4: tunnels to an IPv4 address it embeds (deprecated, RFC 7526)
  ['64:ff9b::', 96], // NAT64 can reach any IPv4 address
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10],
  ['ff00::', 8], // multicast
] as const) {
  BLOCKED.addSubnet(net, prefix, 'ipv6');
}

/** True for an address a webhook may not reach in production. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return BLOCKED.check(mapped[1]!, 'ipv4');
    return BLOCKED.check(address, 'ipv6');
  }
  return true; // not an address at all: refuse rather than guess
}

export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

export class RefusedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedAddressError';
  }
}

/** The host of a URL as the resolver and the socket take it (brackets off an IPv6 literal). */
export const bareHost = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Resolves `hostname` and returns the addresses allowed. When private targets are not allowed, any
 * non-public answer refuses the whole name: a name that points at an internal address even once is
 * not a public endpoint.
 */
export async function allowedAddresses(
  hostname: string,
  allowPrivate: boolean,
  resolve: Resolver = systemResolver,
): Promise<Array<{ address: string; family: number }>> {
  const literal = isIP(hostname);
  const answers = literal ? [{ address: hostname, family: literal }] : await resolve(hostname);
  if (answers.length === 0) throw new RefusedAddressError(`${hostname} has no address`);
  if (!allowPrivate) {
    const bad = answers.find((a) => isNonPublicAddress(a.address));
    if (bad) {
      throw new RefusedAddressError(
        `${hostname} resolves to ${bad.address}, a loopback, private or link-local address`,
      );
    }
  }
  return answers;
}

/**
 * A `lookup` for http.request: resolve, check, and hand the socket the checked address, so the
 * connection goes exactly where the check looked.
 */
export function guardedLookup(allowPrivate: boolean, resolve: Resolver = systemResolver): LookupFunction {
  return (hostname, options, callback) => {
    allowedAddresses(hostname, allowPrivate, resolve).then(
      (answers) => {
        const wanted = typeof options === 'object' && options !== null ? options.family : undefined;
        const pick = answers.find((a) => !wanted || a.family === wanted) ?? answers[0]!;
        if (typeof options === 'object' && options !== null && options.all) {
          (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
            pick,
          ]);
        } else {
          callback(null, pick.address, pick.family);
        }
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}
