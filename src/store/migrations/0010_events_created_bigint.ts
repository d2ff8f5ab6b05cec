import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * PostgreSQL: `events.created` (the webhook envelope's `created`, in Unix seconds) as `bigint`.
 * 0001 made it a 4-byte `integer`, whose largest value is 2147483647, 2038-01-19T03:14:07Z: from
 * the next second on, every write that records an outbox event (an order, a user's update, ...)
 * failed with `value ... is out of range for type integer`. The change rewrites `events` under an
 * exclusive lock (docs/deployment.md, Upgrading). Every int8 is read back as a JS number
 * (src/store/store.ts sets pg's parser), so envelopes, the REST event and gRPC keep numbers.
 *
 * SQLite: nothing; its integers are 64-bit already. No other integer column holds a time or grows
 * without bound (amounts are capped, flags are 0/1, counts and statuses are small).
 */
export function eventsCreatedBigint(dialect: Dialect) {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'postgres') return;
      await sql`ALTER TABLE events ALTER COLUMN created TYPE bigint`.execute(db);
    },
  };
}
