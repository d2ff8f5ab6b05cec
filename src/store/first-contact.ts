import { ConfigError } from '../config/schema.js';
import { isStoreUnavailable } from './errors.js';
import type { Store } from './store.js';

/** PostgreSQL's answers that mean the URL names a role, password or database the server does not have. */
const LOGIN_STATES = new Set(['28000', '28P01', '3D000']);

/** The URL with its password (if any) hidden, for messages. */
export function withoutPassword(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password === '') return databaseUrl;
    url.password = '***';
    return url.toString();
  } catch {
    return databaseUrl.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/**
 * Runs the start's first statements (`work`: the migrations, the first reads). A server that cannot
 * be reached, or refuses the role, password or database the URL names, stops the start as
 * DATABASE_URL's error (one line naming the variable, with the server's reason) instead of an
 * internal error; any other failure passes through. No extra round trip: the first real statement
 * is the probe.
 */
export async function firstContact<T>(store: Store, databaseUrl: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (store.dialect !== 'postgres' || !(isStoreUnavailable(err) || LOGIN_STATES.has(String(code))))
      throw err;
    throw new ConfigError(
      'DATABASE_URL',
      `a PostgreSQL database this process can reach and log in to (${(err as Error).message})`,
      withoutPassword(databaseUrl),
    );
  }
}
