import { type RawBuilder, sql } from 'kysely';
import { requestAbandoned } from '../domain/request-scope.js';
import type { Store } from './store.js';

/** PostgreSQL's SQLSTATE for a statement cancelled on request (`query_canceled`). */
const QUERY_CANCELED = '57014';

/**
 * Runs one read so that, on PostgreSQL, the statement itself stops once `signal` aborts (the
 * request's deadline passed or its client went away). Without this the surface answers 503 on time
 * while the server keeps computing the abandoned answer, and a client's retries stack up behind it.
 * The backend running the statement is cancelled from another pooled connection
 * (`pg_cancel_backend`); its connection goes back to the pool only after that cancel has answered,
 * so a late cancel never reaches the next statement on it (an idle backend ignores a cancel).
 * SQLite answers synchronously, so there is nothing to stop there. The abandoned read fails with
 * `RequestAbandoned`.
 */
export async function readCancellable<R>(
  store: Store,
  query: RawBuilder<R>,
  signal: AbortSignal | undefined,
): Promise<R[]> {
  if (signal?.aborted) throw requestAbandoned();
  if (!signal || store.dialect !== 'postgres') return (await query.execute(store.db)).rows;
  return store.db.connection().execute(async (conn) => {
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
    const pid = rows[0]!.pid;
    let cancelled: Promise<unknown> | undefined;
    const cancel = () => {
      cancelled = sql`select pg_cancel_backend(${pid})`.execute(store.db).catch(() => undefined);
    };
    signal.addEventListener('abort', cancel, { once: true });
    try {
      // Aborted while the pid was read: the listener came too late to fire.
      if (signal.aborted) throw requestAbandoned();
      return (await query.execute(conn)).rows;
    } catch (err) {
      if (signal.aborted && (err as { code?: unknown }).code === QUERY_CANCELED) {
        throw requestAbandoned();
      }
      throw err;
    } finally {
      signal.removeEventListener('abort', cancel);
      await cancelled;
    }
  });
}
