/** Engine-neutral recognition of constraint failures, so the core can turn them into 409s. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: unknown } | null;
  return (
    e?.code === '23505' ||
    e?.code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  );
}

export function isForeignKeyViolation(err: unknown): boolean {
  const e = err as { code?: unknown } | null;
  return e?.code === '23503' || e?.code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/**
 * What a request answers while the database cannot be reached, on every surface (REST's 503, gRPC's
 * INTERNAL, GraphQL's SERVICE_UNAVAILABLE): one text, so a client that recognises it on one
 * recognises it on all, and no storage text.
 */
export const STORE_UNAVAILABLE_MESSAGE = 'The service cannot reach its database right now; retry shortly.';
/** How long to wait before retrying, in seconds, wherever that outage answer says it. */
export const STORE_RETRY_AFTER_SECONDS = 1;

/** PostgreSQL SQLSTATEs that mean "the server is going away or cannot take you now". */
const UNAVAILABLE_STATES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);
/** node-postgres reports a lost or refused connection with these texts and no code. */
const UNAVAILABLE_TEXT =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Client was closed/i;

/**
 * True when the store could not be reached (a restart, a failover, a full pool) rather than when
 * the statement was wrong: the request may succeed if retried, so it is a 503, not a 500.
 */
export function isStoreUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (UNAVAILABLE_STATES.has(e.code) || UNAVAILABLE_ERRNOS.has(e.code)))
    return true;
  // SQLITE_BUSY and its extended codes (_SNAPSHOT, _RECOVERY, _TIMEOUT): another process has the file.
  if (typeof e.code === 'string' && e.code.startsWith('SQLITE_BUSY')) return true;
  return e.code === undefined && typeof e.message === 'string' && UNAVAILABLE_TEXT.test(e.message);
}
