import type { Logger } from 'pino';
import pg from 'pg';
import { OUTBOX_CHANNEL } from '../store/outbox-signal.js';

/** How long to wait before listening again after the connection dropped. */
const RECONNECT_MS = 1_000;

/**
 * LISTENs on the outbox channel with a connection of its own (a pooled one would be handed back
 * and lose the subscription) and calls `wake` on every notification. When the connection drops it
 * reconnects, and wakes once on reconnect for anything committed while it was away; meanwhile the
 * worker's poll is the fallback, so a lost wake-up delays work by one poll interval, never loses it.
 */
export function listenForOutbox(
  connectionString: string,
  wake: () => void,
  logger: Logger,
): { close(): Promise<void> } {
  let client: pg.Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString });
    client = c;
    const lost = (err?: Error) => {
      if (client !== c) return;
      client = undefined;
      void c.end().catch(() => undefined);
      if (closed) return;
      if (err) logger.warn({ err }, 'webhook wake-up connection lost; polling until it is back');
      retry = setTimeout(() => void connect(), RECONNECT_MS);
    };
    c.on('notification', () => wake());
    c.on('error', lost);
    c.on('end', () => lost());
    try {
      await c.connect();
      await c.query(`LISTEN ${OUTBOX_CHANNEL}`);
      wake();
    } catch (err) {
      lost(err as Error);
    }
  };
  void connect();

  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
