import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { memoryLog } from '../helpers/memory-log.js';
import { StatementGate } from '../helpers/statement-gate.js';
import { type Catalogue, makeCatalogue, orderBody } from './orders/fixtures.js';

const TIMEOUT_MS = 600;

/**
 * A REST handler still running when the request deadline (REQUEST_TIMEOUT_MS) answers 503 finishes
 * later, and its own answer is dropped quietly: a value it returns (a read) and an error it throws
 * (a write whose next statement the deadline refuses) go nowhere, and the log has no warning or
 * error for them, only a debug line. Until 2026-11-29 Fastify logged `Reply was already sent` as a
 * warning with a stack for the first and `Promise errored, but reply.sent = true was set` as an
 * error with a stack for the second (GraphQL's routes guarded their own sends).
 */
describe('an answer after the deadline is dropped quietly', () => {
  const gate = new StatementGate();
  const log = memoryLog('debug');
  let atrium: TestAtrium;
  let base: string;
  let headers: Record<string, string>;
  let catalogue: Catalogue;

  beforeAll(async () => {
    atrium = await startTestAtrium({ REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) }, undefined, {
      storePlugins: [gate],
      logger: log.logger,
    });
    catalogue = await makeCatalogue(atrium);
    headers = (await atrium.caller()).headers;
    base = (await atrium.listen()).httpUrl!;
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  /** Sends the request with `held` holding one of its statements past the deadline, then lets it go. */
  async function lateAnswer(
    held: ReturnType<StatementGate['hold']>,
    done: Promise<void>,
    send: () => Promise<Response>,
  ) {
    const res = await send();
    await held.reached;
    const requestId = res.headers.get('x-request-id');
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: 'service_unavailable', request_id: requestId });
    held.release();
    await done;
    // The handler's answer reaches the reply once its work ends, and is logged one way or another
    // beside the 503's access line (`request`): wait for that line.
    const mine = () => log.lines.filter((l) => l.reqId === requestId);
    await expect.poll(() => mine().some((l) => l.msg !== 'request'), { timeout: 5_000 }).toBe(true);
    const lines = mine();
    expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
    expect(lines.map((l) => l.msg)).toContain('answer after the deadline dropped');
    return lines;
  }

  it('a read that returns its body late', async () => {
    const held = gate.hold('SelectQueryNode', 'orders');
    const lines = await lateAnswer(held, Promise.resolve(), () =>
      fetch(`${base}/api/v2/orders?limit=5`, { headers }),
    );
    expect(JSON.stringify(lines)).not.toContain('already sent');
  });

  it('a write whose work is refused after the deadline and throws', async () => {
    // The order's INSERT has run inside its transaction; its next statement is refused, and the
    // idempotency claim is released last, after the rollback.
    const held = gate.hold('InsertQueryNode', 'orders');
    const released = gate.observe('DeleteQueryNode', 'idempotency_records');
    const lines = await lateAnswer(held, released, () =>
      fetch(`${base}/api/v2/orders`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify(orderBody(catalogue)),
      }),
    );
    expect(JSON.stringify(lines)).not.toMatch(/already sent|Promise errored/);
  });
});
