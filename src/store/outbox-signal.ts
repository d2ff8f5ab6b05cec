import { sql } from 'kysely';
import type { Dialect } from './dialect.js';
import type { Db } from './store.js';

/** The PostgreSQL channel on which writers tell delivery workers that the outbox has work. */
export const OUTBOX_CHANNEL = 'atrium_outbox';

/**
 * Wakes delivery workers in other processes. On PostgreSQL a NOTIFY is queued by the transaction
 * and delivered only when it commits (never for a rollback), so a worker woken by it always finds
 * the rows; notifications of one transaction on one channel with one payload are folded into one.
 * SQLite has a single serving process, woken by the in-process bus instead.
 */
export async function signalOutbox(db: Db, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(db);
}
