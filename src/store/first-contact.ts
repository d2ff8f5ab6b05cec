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
 * The start's first statement. A server that cannot be reached, or refuses the role, password or
 * database the URL names, stops the start as DATABASE_URL's error (one line naming the variable,
 * with the server's reason) instead of an internal error; any other failure passes through.
 */
export async function firstContact(store: Store, databaseUrl: string): Promise<void> {
  try {
    await store.ping();
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
