import { type IdPrefix, isId } from './ids.js';

/**
 * The shape every batch read shares (data loaders ask for many ids at once): nothing asked, no query;
 * each id asked once; the answer keyed by id, with missing ids simply absent. A string that is not an
 * id of `prefix`'s kind (ids.ts `isId`) names nothing and is absent without being read, as the
 * one-by-one reads treat it: on every engine alike (PostgreSQL would refuse one holding NUL).
 */
export async function byIds<Row extends { id: string }, T>(
  ids: readonly string[],
  prefix: IdPrefix,
  load: (unique: string[]) => Promise<Row[]>,
  toDomain: (row: Row) => T,
): Promise<Map<string, T>> {
  const unique = [...new Set(ids)].filter((id) => isId(id, prefix));
  if (unique.length === 0) return new Map();
  const rows = await load(unique);
  return new Map(rows.map((r) => [r.id, toDomain(r)]));
}
