/**
 * The shape every batch read shares (data loaders ask for many ids at once): nothing asked, no query;
 * each id asked once; the answer keyed by id, with missing ids simply absent.
 */
export async function byIds<Row extends { id: string }, T>(
  ids: readonly string[],
  load: (unique: string[]) => Promise<Row[]>,
  toDomain: (row: Row) => T,
): Promise<Map<string, T>> {
  if (ids.length === 0) return new Map();
  const rows = await load([...new Set(ids)]);
  return new Map(rows.map((r) => [r.id, toDomain(r)]));
}
