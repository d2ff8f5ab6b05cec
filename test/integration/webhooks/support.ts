import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { closeServices, createServices, type Services } from '../../../src/compose.js';
import { parseConfig } from '../../../src/config/schema.js';
import type { TestAtrium } from '../../helpers/atrium.js';
import { sharedDatabase, type TestDatabase } from '../../helpers/database.js';
import { until } from '../../helpers/wait.js';

/** Stripe's own verifier: the test receiver checks every delivery the way a Stripe user would. */
const stripe = new Stripe('sk_test_atrium_webhook_tests');

export interface Received {
  /** Milliseconds (performance.now) when the request arrived. */
  at: number;
  /** Milliseconds (performance.now) when the receiver wrote its answer; unset while it holds it. */
  answeredAt?: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: string;
  attempt: number;
  eventId: string;
  type: string;
}

export interface Reply {
  status: number;
  body?: string;
  /** Answer after this long; Infinity never answers. */
  delayMs?: number;
  /** Extra response headers (a redirect's `location`). */
  headers?: Record<string, string>;
}

export type Responder = (request: Received, nthForEvent: number) => Reply;

/**
 * A real HTTP receiver on a port of its own. Each path is one endpoint: `/ok`, `/status/500`,
 * anything; the responder decides the answer from the request and how many times this event has
 * arrived at this path.
 */
export class Receiver {
  readonly received: Received[] = [];
  private server!: http.Server;
  private readonly waiters = new Set<() => void>();
  private readonly held = new Set<http.ServerResponse>();
  responder: Responder = () => ({ status: 200 });

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let parsed: { id?: string; type?: string } = {};
        try {
          parsed = JSON.parse(raw) as typeof parsed;
        } catch {
          // recorded as it came; the test asserts on it
        }
        const item: Received = {
          at: performance.now(),
          path: req.url ?? '',
          headers: req.headers,
          raw,
          attempt: Number(req.headers['x-webhook-attempt']),
          eventId: parsed.id ?? '',
          type: parsed.type ?? '',
        };
        this.received.push(item);
        const nth = this.received.filter((r) => r.path === item.path && r.eventId === item.eventId).length;
        const reply = this.responder(item, nth);
        for (const w of this.waiters) w();
        const send = () => {
          this.held.delete(res);
          item.answeredAt = performance.now();
          res
            .writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers })
            .end(reply.body ?? `status ${reply.status}`);
        };
        if (reply.delayMs === Infinity) this.held.add(res);
        else if (reply.delayMs) {
          this.held.add(res);
          setTimeout(send, reply.delayMs);
        } else send();
      });
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Resolves once `predicate` holds, or fails after `timeoutMs` with what arrived so far. */
  async until(predicate: (all: Received[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      const left = deadline - Date.now();
      if (left <= 0) {
        const seen = this.received.map((r) => `${r.path} ${r.type} #${r.attempt}`).join('; ');
        throw new Error(`receiver: condition not met within ${timeoutMs} ms; received: ${seen}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 50));
        this.waiters.add(() => {
          clearTimeout(t);
          resolve();
        });
      });
      this.waiters.clear();
    }
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Verifies with Stripe's `webhooks.constructEvent`; throws exactly as Stripe would for a bad signature. */
export function verifyWithStripe(received: Received, secret: string): { id: string; type: string } {
  const header = received.headers['x-webhook-signature'];
  if (typeof header !== 'string') throw new Error('no X-Webhook-Signature header');
  return stripe.webhooks.constructEvent(received.raw, header, secret) as unknown as {
    id: string;
    type: string;
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Creates an endpoint through the REST API; returns the body (with the secret). */
export async function createEndpoint(
  atrium: TestAtrium,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string; url: string; events: string[]; status: string }> {
  const res = await atrium.http!.inject({
    method: 'POST',
    url: '/api/v2/webhook_endpoints',
    headers,
    payload: body,
  });
  if (res.statusCode !== 201) throw new Error(`endpoint creation answered ${res.statusCode}: ${res.body}`);
  return res.json();
}

export async function api(
  atrium: TestAtrium,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  headers: Record<string, string>,
  payload?: unknown,
) {
  const res = await atrium.http!.inject({
    method,
    url,
    headers,
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
  return { status: res.statusCode, body: res.body === '' ? null : (res.json() as Record<string, unknown>) };
}

/** One recorded attempt as `GET .../attempts` lists it. */
export interface AttemptRow {
  attempt: number;
  status_code: number | null;
  error: string | null;
  created_at: string;
  [field: string]: unknown;
}

/** The endpoint's deliveries (newest first), read through the REST API as its owner reads them. */
export async function deliveriesOf(
  atrium: TestAtrium,
  endpointId: string,
  headers: Record<string, string>,
): Promise<Array<Record<string, unknown>>> {
  const res = await api(atrium, 'GET', `/api/v2/webhook_endpoints/${endpointId}/deliveries`, headers);
  if (res.status !== 200) throw new Error(`deliveries answered ${res.status}`);
  return (res.body as { data: Array<Record<string, unknown>> }).data;
}

/**
 * The endpoint's deliveries once `done` holds for them, read as `deliveriesOf` reads them every
 * 50 ms for at most `timeoutMs`: an outcome is written after the receiver has answered, in a batch
 * of its own, so a test that reads right after the receiver saw the attempt (or after a fixed sleep)
 * raced that write and lost it on a loaded machine.
 */
export async function deliveriesWhen(
  atrium: TestAtrium,
  endpointId: string,
  headers: Record<string, string>,
  done: (deliveries: Array<Record<string, unknown>>) => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<Array<Record<string, unknown>>> {
  let seen: Array<Record<string, unknown>> = [];
  await until(
    async () => done((seen = await deliveriesOf(atrium, endpointId, headers))),
    what,
    timeoutMs,
    50,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last read: ${JSON.stringify(seen)}`);
  });
  return seen;
}

/** The endpoint's attempts (newest first), read through the REST API as its owner reads them. */
export async function attemptsOf(
  atrium: TestAtrium,
  endpointId: string,
  headers: Record<string, string>,
): Promise<AttemptRow[]> {
  const res = await api(atrium, 'GET', `/api/v2/webhook_endpoints/${endpointId}/attempts`, headers);
  if (res.status !== 200) throw new Error(`attempts answered ${res.status}`);
  return (res.body as { data: AttemptRow[] }).data;
}

/** Gaps between consecutive arrivals, in ms. */
export const gaps = (items: Received[]): number[] => items.slice(1).map((r, i) => r.at - items[i]!.at);

/**
 * What a test of worker processes (`serve` children) sets up beside them: a fresh database, services
 * of its own over it (migrated: they create users, endpoints and orders, and read the outbox) and a
 * receiver.
 */
export interface WorkerBed {
  database: TestDatabase;
  services: Services;
  receiver: Receiver;
}

export async function workerBed(env: Record<string, string>): Promise<WorkerBed> {
  const database = await sharedDatabase();
  const services = await createServices(
    parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url, ...env }),
    {
      migrate: true,
    },
  );
  return { database, services, receiver: await new Receiver().start() };
}

/** Closes what `workerBed` made, as far as it got. */
export async function closeWorkerBed(bed: Partial<WorkerBed>): Promise<void> {
  if (bed.services) await closeServices(bed.services);
  await bed.receiver?.stop();
  await bed.database?.drop();
}
