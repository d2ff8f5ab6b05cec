import type { Insertable, Kysely, Transaction } from 'kysely';
import type { Database } from '../store/types.js';

type Writer = Kysely<Database> | Transaction<Database>;

/**
 * Bound parameters per statement. SQLite allows 32,766 and PostgreSQL 65,535; staying well under
 * both keeps one code path for the two engines.
 */
const MAX_PARAMS = 20_000;

/** Inserts rows with as few multi-row statements as the parameter limit allows. */
export async function insertRows<T extends keyof Database & string>(
  db: Writer,
  table: T,
  rows: ReadonlyArray<Insertable<Database[T]>>,
): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!).length;
  const perStatement = Math.max(1, Math.floor(MAX_PARAMS / columns));
  for (let i = 0; i < rows.length; i += perStatement) {
    // Kysely cannot relate a generic table name to its row type; the signature above does.
    await db
      .insertInto(table)
      .values(rows.slice(i, i + perStatement) as never)
      .execute();
  }
}
