import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A plain TCP relay to a real server (PostgreSQL, Redis), so a test can make that server
 * unreachable for one Atrium without touching the server itself: `cut()` drops every relayed
 * connection and stops listening, so the next connection attempt is refused (ECONNREFUSED), as
 * when a deployment's PostgreSQL goes away.
 */
export class TcpProxy {
  private constructor(
    private readonly server: Server,
    private readonly sockets: Set<Socket>,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      const upstream = connect(target.port, target.host);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return new TcpProxy(server, sockets, (server.address() as { port: number }).port);
  }

  /** Drops every relayed connection and refuses new ones from now on. */
  async cut(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /**
   * Relays again after `cut()`, on the same port: the server came back, and the clients configured
   * with this address reconnect to it as they would to a restarted database.
   */
  async restore(): Promise<void> {
    if (this.server.listening) return;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }
}
