import { randomBytes } from 'node:crypto';
import type { Store } from '../store/store.js';

/**
 * A value made once and then shared through the settings table, so every instance (and the CLI)
 * agrees on it. When two make it at once, the first insert wins and both read the winner.
 */
export async function settingOnce(store: Store, key: string, make: () => Promise<string>): Promise<string> {
  const read = () =>
    store.db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  const existing = await read();
  if (existing) return existing.value;
  const value = await make();
  await store.db
    .insertInto('settings')
    .values({ key, value })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  return (await read())!.value;
}

/** A random secret kept in settings (for example the key that signs CSRF tokens). */
export async function sharedSecret(store: Store, key: string): Promise<Buffer> {
  const value = await settingOnce(store, key, async () => randomBytes(32).toString('base64'));
  return Buffer.from(value, 'base64');
}
