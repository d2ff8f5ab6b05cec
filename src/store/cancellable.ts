import { randomBytes } from 'node:crypto';
import { type RawBuilder, sql } from 'kysely';
import { requestAbandoned } from '../domain/request-scope.js';
import type { Store } from './store.js';

/** PostgreSQL's SQLSTATE for a statement cancelled on request (`query_canceled`). */
const QUERY_CANCELED = '57014';

/**
 * Runs one read so that, on PostgreSQL, the statement itself stops once any of `signals` aborts (the
 * request's deadline passed or its client went away). Without this the surface answers 503 on time
 * while the server keeps computing the abandoned answer, and a client's retries stack up behind it.
 *
 * The statement carries a random mark in a leading comment, and the cancel names the mark, not a
 * backend: it can only ever stop this read, so the connection goes back to the pool at once and a
 * late cancel cannot reach the next statement run on it. The cancel goes out on a connection of
 * its own (`Store.cancelMarked`): abandoned reads may hold every pooled one. A read that got its
 * connection only after the abort does not start. SQLite answers synchronously, so there is
 * nothing to stop there. The abandoned read fails with `RequestAbandoned`.
 */
export async function readCancellable<R>(
  store: Store,
  query: RawBuilder<R>,
  given: ReadonlyArray<AbortSignal | undefined>,
): Promise<R[]> {
  // One listener per distinct signal (the same one may come twice), rather than a composed signal.
  const signals = [...new Set(given.filter((s): s is AbortSignal => s !== undefined))];
  const aborted = () => signals.some((s) => s.aborted);
  if (aborted()) throw requestAbandoned();
  const { cancelMarked } = store;
  if (signals.length === 0 || cancelMarked === undefined) return (await query.execute(store.db)).rows;
  const mark = `atrium-read-${randomBytes(8).toString('hex')}`;
  let cancelled = false;
  const cancel = () => {
    if (cancelled) return;
    cancelled = true;
    void cancelMarked(mark);
  };
  for (const s of signals) s.addEventListener('abort', cancel, { once: true });
  try {
    return await store.db.connection().execute(async (conn) => {
      if (aborted()) throw requestAbandoned();
      return (await sql<R>`/* ${sql.raw(mark)} */ ${query}`.execute(conn)).rows;
    });
  } catch (err) {
    if (aborted() && (err as { code?: unknown }).code === QUERY_CANCELED) throw requestAbandoned();
    throw err;
  } finally {
    for (const s of signals) s.removeEventListener('abort', cancel);
  }
}
