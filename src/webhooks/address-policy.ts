import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * The SSRF rule. With WEBHOOK_ALLOW_PRIVATE=false a webhook may only reach public addresses: the
 * target is refused at creation when it resolves to loopback, private, link-local or other
 * non-public space, and again at every delivery, where the address checked is the address the
 * socket connects to (so a DNS answer that changes between check and use cannot slip through).
 */
/*
 * The source is IANA's special-purpose address registries (IPv4 and IPv6, as of 2026-11): every
 * block marked "Globally Reachable: False" is refused, and the few blocks inside one that are
 * marked True are allowed again. On top of those the rule refuses, by choice, multicast, the
 * deprecated site-local and 6to4-relay blocks, and every form that embeds an IPv4 address a
 * tunnel or translator may lead to (below). Addresses outside all of these are public.
 */
const BLOCKED_V4 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // shared address space (carrier-grade NAT)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (but .9 and .10, below)
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated, RFC 7526): refused like 6to4 itself
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast (not in the registry; never a webhook receiver)
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const) {
  BLOCKED_V4.addSubnet(net, prefix, 'ipv4');
}
/** Blocks the registry marks globally reachable inside a block it does not. */
const REACHABLE_V4 = new BlockList();
REACHABLE_V4.addAddress('192.0.0.9', 'ipv4'); // Port Control Protocol anycast
REACHABLE_V4.addAddress('192.0.0.10', 'ipv4'); // TURN anycast

const BLOCKED_V6 = new BlockList();
for (const [net, prefix] of [
  // Unspecified ::/128 and loopback ::1/128, and (a choice) every IPv4-compatible ::a.b.c.d
  // (deprecated): a host may still route one to the IPv4 address it embeds.
  ['::', 96],
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT, RFC 2765): only a translator reaches one
  ['64:ff9b:1::', 48], // local-use IPv4/IPv6 translation (RFC 8215)
  ['100::', 64], // discard-only
  ['100:0:0:1::', 64], // dummy IPv6 prefix (RFC 9780)
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID ... (exceptions below)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (a choice: tunnels to the IPv4 address it embeds; deprecated, RFC 7526)
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // segment routing SIDs (RFC 9602)
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated; not in the registry)
  ['ff00::', 8], // multicast (not in the registry)
] as const) {
  BLOCKED_V6.addSubnet(net, prefix, 'ipv6');
}
const REACHABLE_V6 = new BlockList();
for (const address of ['2001:1::1', '2001:1::2', '2001:1::3']) REACHABLE_V6.addAddress(address, 'ipv6'); // anycast services
for (const [net, prefix] of [
  ['2001:3::', 32], // AMT
  ['2001:4:112::', 48], // AS112-v6
  ['2001:20::', 28], // ORCHIDv2
  ['2001:30::', 28], // Drone Remote ID
] as const) {
  REACHABLE_V6.addSubnet(net, prefix, 'ipv6');
}
// Teredo (2001::/32) lies in 2001::/23 and in none of the exceptions: refused (it tunnels to the
// IPv4 address it embeds).

function isNonPublicIpv4(address: string): boolean {
  return BLOCKED_V4.check(address, 'ipv4') && !REACHABLE_V4.check(address, 'ipv4');
}

/** The 16 bytes of an IPv6 address (any spelling, with or without a dotted IPv4 tail), or null. */
function ipv6Bytes(address: string): Uint8Array | null {
  let text = address.replace(/%.*$/, ''); // a zone (fe80::1%eth0) is not part of the address
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] === '' ? [] : halves[0]!.split(':');
  const rest = halves.length === 2 ? (halves[1] === '' ? [] : halves[1]!.split(':')) : [];
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0;
  const groups = [...head, ...Array<string>(Math.max(0, fill)).fill('0'), ...rest];
  if (groups.length !== 8 || fill < 0) return null;
  const bytes = new Uint8Array(16);
  for (const [i, g] of groups.entries()) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    const v = parseInt(g, 16);
    bytes[2 * i] = v >> 8;
    bytes[2 * i + 1] = v & 0xff;
  }
  return bytes;
}

const startsWith = (bytes: Uint8Array, prefix: readonly number[]) => prefix.every((b, i) => bytes[i] === b);
const IPV4_MAPPED = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]; // ::ffff:0:0/96
const NAT64_WELL_KNOWN = [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]; // 64:ff9b::/96
const lastFour = (bytes: Uint8Array) => Array.from(bytes.subarray(12)).join('.');

/** True for an address a webhook may not reach in production. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return isNonPublicIpv4(address);
  if (family === 6) {
    const bytes = ipv6Bytes(address);
    if (!bytes) return true;
    // IPv4-mapped (::ffff:a.b.c.d): the socket connects over IPv4 to the address it embeds.
    // Well-known NAT64 (64:ff9b::/96, globally reachable): the translator connects to the IPv4
    // address it embeds, so that address decides (RFC 6052 forbids it for non-global IPv4).
    if (startsWith(bytes, IPV4_MAPPED) || startsWith(bytes, NAT64_WELL_KNOWN)) {
      return isNonPublicIpv4(lastFour(bytes));
    }
    const hex = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16));
    const canonical = hex.join(':');
    return BLOCKED_V6.check(canonical, 'ipv6') && !REACHABLE_V6.check(canonical, 'ipv6');
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
