import type { Transaction } from 'kysely';
import type { DomainBus, DomainSignal } from '../events/bus.js';
import { signalOutbox } from '../store/outbox-signal.js';
import type { Db, Store } from '../store/store.js';
import type { Database } from '../store/types.js';
import type { Clock } from './clock.js';
import { iso, unixSeconds } from './clock.js';
import type { CursorCodec } from './cursor.js';
import { newEventId } from './ids.js';
import { eventDataText } from './event-data.js';

/** What every domain service is built from. The composition root makes one of these. */
export interface CoreDeps {
  store: Store;
  clock: Clock;
  bus: DomainBus;
  cursors: CursorCodec;
}

/**
 * The webhook payload schema version carried by every event: 2026-11-28 sends the timestamps inside
 * `data` as Unix seconds (./event-data.ts); 2026-11-01 sent them as ISO 8601 strings.
 */
export const API_VERSION = '2026-11-28';

export interface Tx {
  readonly db: Transaction<Database> | Db;
  /** Writes an outbox event in this transaction; returns its `evt_` id. */
  recordEvent(type: string, ownerId: string | null, data: Record<string, unknown>): Promise<string>;
  /** Queues an in-process signal sent once the transaction has committed. */
  afterCommit(signal: DomainSignal): void;
}

/**
 * Runs `work` in one database transaction. Outbox events are written inside it; signals are sent
 * only after commit. A throw anywhere rolls back every write: no half records.
 */
export async function inTransaction<T>(deps: CoreDeps, work: (tx: Tx) => Promise<T>): Promise<T> {
  const signals: DomainSignal[] = [];
  let signalled = false;
  const result = await deps.store.db.transaction().execute(async (trx) => {
    const tx: Tx = {
      db: trx,
      async recordEvent(type, ownerId, data) {
        const now = deps.clock.now();
        const id = newEventId(now.getTime());
        await trx
          .insertInto('events')
          .values({
            id,
            type,
            api_version: API_VERSION,
            owner_id: ownerId,
            data: eventDataText(data),
            created: unixSeconds(now),
            created_at: iso(now),
            dispatched_at: null,
          })
          .execute();
        // Workers in other processes (PostgreSQL) hear of it at commit; once per transaction is enough.
        if (!signalled) {
          signalled = true;
          await signalOutbox(trx, deps.store.dialect);
        }
        signals.push({ kind: 'event.recorded', eventId: id, type });
        return id;
      },
      afterCommit(signal) {
        signals.push(signal);
      },
    };
    return work(tx);
  });
  for (const s of signals) deps.bus.emit(s);
  return result;
}

/**
 * Runs `work` in the caller's transaction when given one (an idempotent request stores its response
 * in the same transaction as its work), else in a transaction of its own.
 */
export function inGivenTransaction<T>(
  deps: CoreDeps,
  tx: Tx | undefined,
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  return tx ? work(tx) : inTransaction(deps, work);
}
