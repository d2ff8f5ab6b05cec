import type { Logger } from 'pino';
import pg from 'pg';
import { isStoreUnavailable } from '../store/errors.js';
import type { StoreOutageLog } from '../store/outage-log.js';
import { OUTBOX_CHANNEL } from '../store/outbox-signal.js';

/** How long to wait before listening again after the connection dropped. */
const RECONNECT_MS = 1_000;

/**
 * LISTENs on the outbox channel with a connection of its own (a pooled one would be handed back
 * and lose the subscription) and calls `wake` on every notification. When the connection drops it
 * reconnects, and wakes once on reconnect for anything committed while it was away; meanwhile the
 * worker's poll is the fallback, so a lost wake-up delays work by one poll interval, never loses it.
 * Logging follows the worker's outage (`outage`): a connection refused because the database is away
 * is that outage, one warning for all of it rather than one per reconnect attempt every second. A
 * connection that drops (a restart, a terminated backend) is said once: as part of the outage when
 * reconnecting fails, or in one line when it is listening again at once. Any other failure is logged
 * as it comes.
 */
export function listenForOutbox(
  connectionString: string,
  wake: () => void,
  logger: Logger,
  outage: StoreOutageLog,
): { close(): Promise<void> } {
  let client: pg.Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  /** The established connection's loss, not logged yet. */
  let lostWith: Error | undefined;
  /** Since that loss, the database was found away: the outage's lines tell it. */
  let outageSeen = false;

  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString });
    client = c;
    let listening = false;
    const lost = (err?: Error) => {
      if (client !== c) return;
      client = undefined;
      void c.end().catch(() => undefined);
      if (closed) return;
      if (err && !listening) {
        if (outage.unreachable(err)) outageSeen = true;
        else logger.warn({ err }, 'webhook wake-up connection failed; polling until it is back');
      } else if (err && isStoreUnavailable(err)) {
        lostWith = err;
        if (outage.down) outageSeen = true;
      } else if (err) logger.warn({ err }, 'webhook wake-up connection lost; polling until it is back');
      retry = setTimeout(() => void connect(), RECONNECT_MS);
    };
    c.on('notification', () => wake());
    c.on('error', lost);
    c.on('end', () => lost());
    try {
      await c.connect();
      await c.query(`LISTEN ${OUTBOX_CHANNEL}`);
      listening = true;
      if (outage.down) outageSeen = true;
      outage.answered();
      if (lostWith && !outageSeen) {
        const code = (lostWith as { code?: unknown }).code;
        logger.warn(
          { err: lostWith.message, ...(typeof code === 'string' ? { code } : {}) },
          'webhook wake-up connection was lost; listening again',
        );
      }
      lostWith = undefined;
      outageSeen = false;
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
