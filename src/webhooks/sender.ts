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

  constructor(private readonly options: SenderOptions) {
    // Keep-alive: most deliveries go to a few receivers; a fresh connection per attempt costs more
    // than the request itself.
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64, scheduling: 'lifo' });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 64, scheduling: 'lifo' });
    this.lookup = guardedLookup(options.allowPrivate, options.resolve);
  }

  send(request: SendRequest): Promise<SendOutcome> {
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    return new Promise<SendOutcome>((resolve) => {
      let settled = false;
      // Set once the request exists; a target refused before that has no timer to clear.
      const timing: { timer?: NodeJS.Timeout } = {};
      const finish = (result: AttemptResult, excerpt: string | null = null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timing.timer);
        resolve({ result, durationMs: elapsed(), excerpt });
      };
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

      const req = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? this.httpsAgent : this.httpAgent,
        lookup: this.lookup,
        headers: {
          ...request.headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(request.body, 'utf8')),
          'user-agent': this.options.userAgent ?? 'Atrium-Webhooks/1',
        },
      });
      timing.timer = setTimeout(() => {
        finish({ kind: 'timeout' });
        req.destroy();
      }, this.options.timeoutMs);
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
            kept === 0 ? null : Buffer.concat(chunks).toString('utf8'),
          );
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      });
      req.on('error', (err) => {
        if (err instanceof RefusedAddressError) finish({ kind: 'refused', message: err.message });
        else finish({ kind: 'connection', message: connectionMessage(err) });
      });
      // A string body goes out in the same write as the headers (a Buffer would be a second one).
      req.end(request.body, 'utf8');
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** A short, stable description of a network error for the attempt record. */
function connectionMessage(err: NodeJS.ErrnoException): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}
