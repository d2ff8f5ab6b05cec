import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { FIRST_REQUEST_GRACE_MS } from '../process/first-request.js';

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
  /** Open connections, with when each was accepted. */
  private readonly sockets = new Map<Socket, number>();
  /** Requests whose headers were read and whose answer has not ended, per connection. */
  private readonly requests = new Map<Socket, number>();
  /** Connections that have carried at least one request (a balancer's kept-alive ones among them). */
  private readonly used = new WeakSet<Socket>();
  private closing = false;
  private cutting = false;

  constructor(private readonly server: Server) {
    server.on('connection', (socket: Socket) => {
      this.sockets.set(socket, Date.now());
      socket.once('close', () => {
        this.sockets.delete(socket);
        this.requests.delete(socket);
      });
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const socket = req.socket;
      this.used.add(socket);
      this.requests.set(socket, (this.requests.get(socket) ?? 0) + 1);
      res.once('close', () => {
        const left = (this.requests.get(socket) ?? 1) - 1;
        if (left > 0) {
          this.requests.set(socket, left);
          return;
        }
        this.requests.delete(socket);
        // The last answer on a connection during the drain's last step ends it, even one that had
        // promised keep-alive before the drain began: an idle connection would hold the drain.
        if (this.cutting && (socket as Socket & { parser?: unknown }).parser) destroyLater(socket);
      });
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
   * The drain's last step: refuses new connections and closes every connection that carries no
   * request, kept-alive idle ones and those that never completed a request's headers (a port
   * scanner, a TCP health check, a browser's preconnect, a client trickling its headers). Left
   * open, any of them held the drain until its 30 s limit and the exit was 1. A request whose
   * headers were read is in flight, its body still arriving or not: it finishes (within
   * REQUEST_TIMEOUT_MS) and its connection closes after the answer.
   */
  closeUnused(): void {
    this.stopAccepting();
    this.cutting = true;
    for (const socket of this.sockets.keys()) {
      // Upgraded (WebSocket) connections have no parser; the surface closes them itself.
      if (!(socket as Socket & { parser?: unknown }).parser) continue;
      if (!this.requests.has(socket)) socket.destroy();
    }
  }

  /**
   * HTTP connections the drain waits for a balancer to close (docs/deployment.md, step 2): those
   * carrying a request, and those that have carried one and are kept alive (the balancer's to close:
   * closing one here races a request written on it). A connection that has not completed a request
   * counts only during its first FIRST_REQUEST_GRACE_MS, while a balancer's first request may still
   * be on its way; after that it is a port scanner's, a preconnect, a trickler, which the last step
   * closes (closeUnused) and which would otherwise hold this one for its full length.
   * Upgraded ones (WebSocket) are not counted: they hold no request and end with the surface's own
   * close (1001).
   */
  openConnections(): number {
    let n = 0;
    const now = Date.now();
    for (const [s, accepted] of this.sockets) {
      // Node frees a connection's parser when it is upgraded.
      if (!(s as Socket & { parser?: unknown }).parser) continue;
      if (this.requests.has(s) || this.used.has(s) || now - accepted < FIRST_REQUEST_GRACE_MS) n++;
    }
    return n;
  }
}

/** Ends the connection once what was written to it has been handed to the system, then cuts it. */
function destroyLater(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writable) socket.end();
  if (socket.writableFinished) socket.destroy();
  else socket.once('finish', () => socket.destroy());
}
