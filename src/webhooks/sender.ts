import http from 'node:http';
import https from 'node:https';
import {
  guardedLookup,
  isNonPublicAddress,
  RefusedAddressError,
  bareHost,
  type Resolver,
} from './address-policy.js';
import { isIP } from 'node:net';
import type { AttemptResult } from './schedule.js';

/** How much of a response body an attempt record keeps. */
export const EXCERPT_BYTES = 1024;
/** Read at most this much of a response before dropping the connection. */
const DRAIN_LIMIT = 64 * 1024;
/**
 * A pooled socket idle this long is closed. Receivers close idle keep-alive connections after their
 * own timeout (Node and Express: 5 s, many proxies about as long); a request written on a socket the
 * receiver is closing at that moment is reset unseen. Closing ours first avoids most such races.
 */
export const IDLE_SOCKET_MS = 4_000;
/** Errors of a request on a reused socket that the receiver closed before reading it. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE']);

export interface SendRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

export interface SendOutcome {
  result: AttemptResult;
  durationMs: number;
  excerpt: string | null;
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  resolve?: Resolver;
  userAgent?: string;
  /** Close pooled sockets idle longer than this (default IDLE_SOCKET_MS). */
  idleSocketMs?: number;
}

/**
 * One HTTP POST per attempt, with a hard per-attempt timeout covering connect, send and the whole
 * response. Redirects are never followed (Node's client does not follow them). Addresses go through
 * the SSRF guard at connect time, so the checked address is the connected address.
 */
export class WebhookSender {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  private readonly lookup;
  /** What ends each send in flight as cut by the stop. */
  private readonly inFlight = new Set<() => void>();
  private cutting = false;

  constructor(private readonly options: SenderOptions) {
    // Keep-alive: most deliveries go to a few receivers; a fresh connection per attempt costs more
    // than the request itself. `timeout` is the agent's idle limit: Node destroys a *free* socket
    // when it elapses (and lowers it further to a receiver's `Keep-Alive: timeout=` hint less 1 s).
    // On a socket in use it only emits 'timeout' on the request, which nothing here listens to:
    // an attempt's own limit is the timer in send().
    const agentOptions = {
      keepAlive: true,
      maxSockets: 64,
      scheduling: 'lifo' as const,
      timeout: options.idleSocketMs ?? IDLE_SOCKET_MS,
    };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
    this.lookup = guardedLookup(options.allowPrivate, options.resolve);
  }

  send(request: SendRequest): Promise<SendOutcome> {
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    return new Promise<SendOutcome>((resolve) => {
      let settled = false;
      // Set once the request exists; a target refused before that has no timer to clear.
      const timing: { timer?: NodeJS.Timeout; req?: http.ClientRequest } = {};
      const finish = (result: AttemptResult, excerpt: string | null = null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timing.timer);
        this.inFlight.delete(cutThis);
        resolve({ result, durationMs: elapsed(), excerpt });
      };
      const cutThis = () => {
        finish({ kind: 'timeout', stopped: true });
        timing.req?.destroy();
      };
      if (this.cutting) {
        cutThis();
        return;
      }
      this.inFlight.add(cutThis);
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        finish({ kind: 'refused', message: 'the endpoint URL is not valid' });
        return;
      }
      // A literal address never goes through lookup, so it is checked here.
      const host = bareHost(url);
      if (!this.options.allowPrivate && isIP(host) && isNonPublicAddress(host)) {
        finish({ kind: 'refused', message: `${host} is a loopback, private or link-local address` });
        return;
      }
      const secure = url.protocol === 'https:';
      const target = url;

      /**
       * One request. `fresh` asks for a new connection outside the pool (a one-off agent): used
       * only to send again after a reused socket was reset before any answer.
       */
      const post = (fresh: boolean) => {
        const req = (secure ? https : http).request(target, {
          method: 'POST',
          agent: fresh ? false : secure ? this.httpsAgent : this.httpAgent,
          lookup: this.lookup,
          headers: {
            ...request.headers,
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(request.body, 'utf8')),
            'user-agent': this.options.userAgent ?? 'Atrium-Webhooks/1',
          },
        });
        timing.req = req;
        // Bytes the socket had read before this request: more means the answer had begun.
        let readBefore = -1;
        req.on('socket', (socket) => {
          readBefore = socket.bytesRead;
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          let kept = 0;
          let seen = 0;
          res.on('data', (chunk: Buffer) => {
            seen += chunk.length;
            if (kept < EXCERPT_BYTES) {
              chunks.push(chunk.subarray(0, EXCERPT_BYTES - kept));
              kept += Math.min(chunk.length, EXCERPT_BYTES - kept);
            }
            if (seen > DRAIN_LIMIT) res.destroy();
          });
          const done = () =>
            finish(
              { kind: 'response', status: res.statusCode ?? 0 },
              kept === 0 ? null : storableText(Buffer.concat(chunks).toString('utf8')),
            );
          res.on('end', done);
          res.on('close', done);
          res.on('error', done);
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          if (settled) return;
          if (err instanceof RefusedAddressError) {
            finish({ kind: 'refused', message: err.message });
            return;
          }
          // A keep-alive socket the receiver closed as this request went out: the receiver never
          // read it. Send it again at once on a new connection, as the same attempt (same headers
          // and body bytes, the same signature timestamp: the attempt's time), within the same
          // per-attempt timeout. Once: a reset of the fresh connection is a connection error.
          const answerBegan = req.socket !== null && readBefore >= 0 && req.socket.bytesRead > readBefore;
          if (!fresh && req.reusedSocket && !answerBegan && STALE_SOCKET_CODES.has(err.code ?? '')) {
            post(true);
            return;
          }
          finish({ kind: 'connection', message: connectionMessage(err) });
        });
        // A string body goes out in the same write as the headers (a Buffer would be a second one).
        req.end(request.body, 'utf8');
      };

      timing.timer = setTimeout(() => {
        finish({ kind: 'timeout' });
        timing.req?.destroy();
      }, this.options.timeoutMs);
      post(false);
    });
  }

  /**
   * Ends every send in flight, and any started later, as timed out (`stopped`): the stop's deadline,
   * so that their outcomes are written within the drain limit.
   */
  cut(): void {
    this.cutting = true;
    for (const cutOne of [...this.inFlight]) cutOne();
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** A short, stable description of a network error for the attempt record. */
function connectionMessage(err: NodeJS.ErrnoException): string {
  return storableText(err.code ? `${err.code}: ${err.message}` : err.message);
}

/**
 * What a receiver sent, as text every store keeps: NUL becomes U+FFFD, as bytes that are not UTF-8
 * already do. PostgreSQL refuses NUL in text, and the outcome of a whole batch of deliveries is
 * one statement: one receiver's NUL lost every outcome in it (they were sent again).
 */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text;
}
