import type { TestAtrium } from './atrium.js';

/** A key of the right shape whose checksum is wrong: refused without a lookup. */
export const MALFORMED_KEY = 'atr_live_0123456789abcdef0123456789abcdef_zzzzzz';
/** A well-formed key (valid checksum) that was never issued. */
export async function unknownKey(atrium: TestAtrium): Promise<string> {
  const { key, keyId } = await atrium.caller();
  await atrium.services.apiKeys.revoke(keyId);
  await atrium.services.store.db.deleteFrom('api_keys').where('id', '=', keyId).execute();
  return key;
}

/** The parts of an error body that must not differ between two kinds of bad credentials. */
export const comparable = (body: Record<string, unknown>) => {
  const { request_id: _id, ...rest } = body;
  return rest;
};
