import type { Kysely } from 'kysely';

/**
 * Whether an order changed more than once during the second of its `updated_at`. `Last-Modified`
 * is an HTTP date (whole seconds), so two changes in one second leave it as it was; RFC 9110
 * §8.8.2.2 makes such a date a weak validator unless the server knows the order did not change
 * twice in that second. Every write of an order sets the flag (src/domain/orders.ts); rows written
 * before this migration start at 0, as the dates were treated until then.
 */
export const orderSecondChanges = {
  // Migrations are written against the schema as it was then, not today's types.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .alterTable('orders')
      .addColumn('changed_twice_in_second', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};
