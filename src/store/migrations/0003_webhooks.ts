import { type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * What the webhook outbox needs beyond the first schema: the previous secret during a rotation,
 * why an endpoint was disabled, a delivery's last error and manual re-send round, an attempt's
 * response excerpt, events aimed at one endpoint (send-test), and the indexes the listings use.
 */
export function webhooks(_dialect: Dialect) {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('webhook_endpoints').addColumn('previous_secret', 'text').execute();
      await db.schema
        .alterTable('webhook_endpoints')
        .addColumn('previous_secret_expires_at', 'text')
        .execute();
      await db.schema.alterTable('webhook_endpoints').addColumn('disabled_reason', 'text').execute();

      await db.schema.alterTable('events').addColumn('target_endpoint_id', 'text').execute();

      await db.schema.alterTable('webhook_deliveries').addColumn('last_error', 'text').execute();
      await db.schema
        .alterTable('webhook_deliveries')
        .addColumn('round', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_endpoint_idx')
        .on('webhook_deliveries')
        .columns(['endpoint_id', 'id'])
        .execute();

      await db.schema.alterTable('delivery_attempts').addColumn('response_excerpt', 'text').execute();
      await db.schema
        .alterTable('delivery_attempts')
        .addColumn('round', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
      await db.schema.createIndex('events_dispatched_idx').on('events').column('dispatched_at').execute();
    },
  };
}
