import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import type { Dialect } from './dialect.js';
import type { Database } from './types.js';

/**
 * A query whose shape never changes, built and compiled once per dialect and then run with new
 * parameter values. Building and compiling a Kysely query costs more than running a short indexed
 * query on a prepared statement, so the hot reads (the API-key lookup, one order) skip it.
 *
 * `build` receives the database and marker values for its arguments and must use each argument as one bound value
 * (`where(col, '=', arg)`), never to choose the shape: the same SQL must fit every argument. The
 * query runs through `db.executeQuery`, so it joins a transaction when given one, exactly as the
 * built query would.
 */
export function fixedQuery<Args extends string[], Row>(
  build: (db: Kysely<Database>, ...args: Args) => Compilable<Row>,
): (db: Kysely<Database>, dialect: Dialect, ...args: Args) => Promise<Row[]> {
  const compiled = new Map<Dialect, { query: CompiledQuery<Row>; slots: number[] }>();
  return async (db, dialect, ...args) => {
    let entry = compiled.get(dialect);
    if (entry === undefined) {
      const markers = args.map((_, i) => `fixed-query-argument-${i}-${Math.random()}`) as Args;
      const query = build(db, ...markers).compile();
      const slots = query.parameters.map((p) => markers.indexOf(p as string));
      if (new Set(slots.filter((s) => s >= 0)).size !== args.length)
        throw new Error('fixedQuery: every argument must be used as a bound value');
      entry = { query, slots };
      compiled.set(dialect, entry);
    }
    const { query, slots } = entry;
    const parameters = slots.map((slot, i) => (slot < 0 ? query.parameters[i] : args[slot]));
    const result = await db.executeQuery<Row>({ ...query, parameters });
    return result.rows;
  };
}
