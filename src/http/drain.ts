import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * The HTTP half of a drain behind a balancer: stop accepting, let the balancer end its kept-alive
 * connections, and only then close what is left.
 *
 * Why not `server.close()` at once: it also destroys every idle kept-alive connection, and a balancer
 * may be writing a request on one of them at that moment (or have written one this process has not
 * read yet on a busy machine). The request is then lost with a reset, and nginx never resends a
 * POST once it has been sent (a 502 for the client). Closing only the listener is safe: a refused
 * connection carried nothing, so nginx sends that request, whatever its method, to another instance.
 */
export class HttpDrain {
  private readonly sockets = new Set<Socket>();
  private closing = false;

  constructor(private readonly server: Server) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  /** True once answers must end their connection (`Connection: close`). */
  get closesConnections(): boolean {
    return this.closing;
  }

  /**
   * Refuses new connections and makes every later answer close its connection; open connections
   * keep being served, so a request already on its way is answered, not cut.
   */
  stopAccepting(): void {
    this.closeAfterAnswers();
    // net.Server's close, not http.Server's: the latter also destroys idle kept-alive connections.
    if (this.server.listening) NetServer.prototype.close.call(this.server);
  }

  /** Every later answer ends its connection; for a drain without a balancer in front. */
  closeAfterAnswers(): void {
    this.closing = true;
  }

  /**
   * HTTP connections still open. Upgraded ones (WebSocket) are not counted: they hold no request
   * and end with the surface's own close (1001).
   */
  openConnections(): number {
    let n = 0;
    // Node frees a connection's parser when it is upgraded.
    for (const s of this.sockets) if ((s as Socket & { parser?: unknown }).parser) n++;
    return n;
  }
}
