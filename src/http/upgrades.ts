import { IncomingMessage, type Server } from 'node:http';

/**
 * Which requests may switch protocols. A server may ignore `Upgrade` (RFC 9110 §7.8), and this one
 * ignores every upgrade but those a surface has asked for (graphql-ws: a GET of /graphql asking
 * for `websocket`): `curl --http2` and Java's HttpClient send `Upgrade: h2c` on any http:// URL and
 * must be answered over HTTP/1.1 like any other request.
 *
 * Node 20 decides alone: once an 'upgrade' listener exists, every request whose parser saw
 * `Upgrade` with `Connection: upgrade` goes to it, the socket taken from the HTTP parser and the
 * body left unread, and nobody answers it over HTTP. The decision reads the request's `upgrade`
 * flag right after its headers are parsed (`parserOnIncoming`), so the server's IncomingMessage
 * class (below) answers that flag: true only for an upgrade some surface accepts. Every other
 * request goes to 'request' as if no 'upgrade' listener existed, with its body parsed by Node.
 */
const accepts = new WeakMap<Server, Array<(request: IncomingMessage) => boolean>>();

/** Lets `test` claim upgrades on `server`; the others are served over HTTP. Returns the undo. */
export function acceptUpgrades(server: Server, test: (request: IncomingMessage) => boolean): () => void {
  const list = accepts.get(server) ?? [];
  list.push(test);
  accepts.set(server, list);
  return () => {
    const at = list.indexOf(test);
    if (at >= 0) list.splice(at, 1);
  };
}

/** True when the request asks to switch to `protocol` (a token of its Upgrade header). */
export function upgradesTo(request: IncomingMessage, protocol: string): boolean {
  const upgrade = request.headers.upgrade;
  if (typeof upgrade !== 'string') return false;
  return upgrade.split(',').some((token) => token.trim().toLowerCase() === protocol);
}

const ASKED = Symbol('upgrade asked');

/**
 * The server's request class (`http.createServer({ IncomingMessage })`). Node sets `upgrade` when
 * the parser saw an upgrade; reading it says whether this server takes that upgrade. CONNECT keeps
 * Node's own handling (no 'connect' listener: the socket is closed).
 */
export class UpgradeAwareMessage extends IncomingMessage {
  declare [ASKED]: boolean | null;

  // Node's own field (undeclared in @types/node), made an accessor.
  get upgrade(): boolean {
    if (this[ASKED] !== true) return false;
    if (this.method === 'CONNECT') return true;
    const server = (this.socket as { server?: Server } | null)?.server;
    return (server && accepts.get(server)?.some((test) => test(this))) ?? false;
  }

  set upgrade(asked: boolean | null) {
    this[ASKED] = asked;
  }

  /** The client asked for an upgrade that this server ignored; it is answered over HTTP/1.1. */
  get upgradeIgnored(): boolean {
    return this[ASKED] === true && !this.upgrade;
  }
}
