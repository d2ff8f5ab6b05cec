import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A plain TCP relay to a real server (PostgreSQL, Redis), so a test can make that server
 * unreachable for one Atrium without touching the server itself: `cut()` drops every relayed
 * connection and stops listening, so the next connection attempt is refused (ECONNREFUSED), as
 * when a deployment's PostgreSQL goes away. `hang()` keeps every connection open and accepts new
 * ones but forwards nothing either way, as a stopped server (SIGSTOP) or a network path that
 * swallows packets does; `resume()` forwards again, what was held back included. `holdAnswers(n)`
 * holds back only what the server answers on one connection (a reply that is late, on a server
 * that is otherwise well), seen through `onClientData`.
 */
export class TcpProxy {
  private constructor(
    private readonly server: Server,
    private readonly sockets: Set<Socket>,
    private readonly pairs: Set<[Socket, Socket]>,
    private readonly state: { hung: boolean },
    private readonly forgotten: WeakSet<Socket>,
    private readonly numbered: Map<number, [Socket, Socket]>,
    readonly port: number,
  ) {}

  static async start(
    target: { host: string; port: number },
    options: {
      /** Each chunk a client sends, with the number of its connection (1 for the first accepted). */
      onClientData?: (chunk: Buffer, connection: number) => void;
    } = {},
  ): Promise<TcpProxy> {
    const sockets = new Set<Socket>();
    const pairs = new Set<[Socket, Socket]>();
    const state = { hung: false };
    const forgotten = new WeakSet<Socket>();
    const numbered = new Map<number, [Socket, Socket]>();
    const server = createServer((client) => {
      const upstream = connect(target.port, target.host);
      const pair: [Socket, Socket] = [client, upstream];
      const connection = numbered.size + 1;
      numbered.set(connection, pair);
      if (options.onClientData)
        client.on('data', (chunk: Buffer) => options.onClientData!(chunk, connection));
      pairs.add(pair);
      for (const s of pair) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => undefined);
      }
      if (state.hung) {
        client.pause();
        upstream.pause();
      } else flow(pair);
      client.on('close', () => (upstream.destroy(), pairs.delete(pair)));
      upstream.on('close', () => {
        pairs.delete(pair);
        if (!forgotten.has(client)) client.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return new TcpProxy(
      server,
      sockets,
      pairs,
      state,
      forgotten,
      numbered,
      (server.address() as { port: number }).port,
    );
  }

  /**
   * Holds back what the server answers on connection `n` (numbered as `onClientData` numbers them)
   * until `releaseAnswers(n)`; what the client sends still goes through. Call it from `onClientData`
   * to hold the answer to that very chunk: it cannot have come back within the same turn.
   */
  holdAnswers(n: number): void {
    const [client, upstream] = this.numbered.get(n)!;
    upstream.unpipe(client);
    upstream.pause();
  }

  /** Forwards connection `n`'s answers again, those held back first. */
  releaseAnswers(n: number): void {
    const [client, upstream] = this.numbered.get(n)!;
    upstream.pipe(client);
    upstream.resume();
  }

  /**
   * Forwards nothing from now on, either way, on the connections open and on new ones (which are
   * still accepted): the bytes wait, as they would in the buffers of a stopped server.
   */
  hang(): void {
    this.state.hung = true;
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** Forwards again, what was held back first, as when the stopped server continues. */
  resume(): void {
    this.state.hung = false;
    for (const pair of this.pairs) flow(pair);
  }

  /**
   * The path forgets every connection open now, as a NAT or firewall that dropped its state does,
   * or a server restarted behind a partition: the server's side is closed, the client's side stays
   * open and silent for good (nothing forwarded either way, no FIN, no RST), so a client learns of
   * it only by waiting for an answer that never comes. New connections are relayed as before
   * (once `resume` is called, if hung).
   */
  forget(): void {
    for (const pair of [...this.pairs]) {
      const [client, upstream] = pair;
      this.forgotten.add(client);
      this.pairs.delete(pair);
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.destroy();
    }
  }

  /** Drops every relayed connection and refuses new ones from now on. */
  async cut(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /**
   * Relays again, on the same port (the client under test keeps its configured address), as when
   * the server comes back after an outage.
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

function flow([client, upstream]: [Socket, Socket]): void {
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
  upstream.resume();
}
