import { ConfigError } from '../config/schema.js';
import { isStoreUnavailable } from './errors.js';
import type { Store } from './store.js';
import { withoutPassword } from '../config/redact.js';

/** PostgreSQL's answers that mean the URL names a role, password or database the server does not have. */
const LOGIN_STATES = new Set(['28000', '28P01', '3D000']);
/** A TLS handshake the URL's sslmode asked for and the server could not give, or gave unverifiably. */
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'EPROTO',
]);
/** node-postgres's text, with no code, when sslmode asks for TLS and the server has none. */
const NO_TLS_TEXT = /server does not support SSL/i;
/** SQLite's answers that mean the file (or its folder) cannot be written or opened. */
const SQLITE_SETTING_CODES = /^SQLITE_(READONLY|CANTOPEN|PERM)/;

/** Whether a failure of the first statements is the setting's fault, and how to say so. */
function settingFault(dialect: string, err: unknown): string | undefined {
  const code = String((err as { code?: unknown } | null)?.code);
  const message = err instanceof Error ? err.message : String(err);
  if (dialect === 'sqlite')
    return SQLITE_SETTING_CODES.test(code)
      ? `an SQLite database file this process can open and write (${message})`
      : undefined;
  if (NO_TLS_TEXT.test(message) || TLS_CODES.has(code))
    return `a PostgreSQL server that can give the TLS its sslmode asks for (${message}); sslmode=disable, or none, for a server without TLS`;
  if (isStoreUnavailable(err) || LOGIN_STATES.has(code))
    return `a PostgreSQL database this process can reach and log in to (${message})`;
  return undefined;
}

/**
 * Runs the start's first statements (`work`: the migrations, the first reads). A server that cannot
 * be reached, refuses the role, password or database the URL names, or cannot give the TLS the
 * URL's sslmode asks for, or an SQLite file that cannot be written, stops the start as
 * DATABASE_URL's error (one line naming the variable, with the server's reason) instead of an
 * internal error; any other failure passes through. No extra round trip: the first real statement
 * is the probe.
 */
export async function firstContact<T>(store: Store, databaseUrl: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const accepts = settingFault(store.dialect, err);
    if (accepts === undefined) throw err;
    throw new ConfigError('DATABASE_URL', accepts, withoutPassword(databaseUrl));
  }
}
