import type { Kysely } from 'kysely';

/**
 * Login tickets (the consent page's proof of sign-in) are single-use: the id of each one used is
 * recorded until the ticket would have expired anyway, in the store every instance shares.
 */
export const loginTickets = {
  // Migrations are written against the schema as it was then, not today's types.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('used_login_tickets')
      .addColumn('ticket_id', 'text', (c) => c.primaryKey())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('used_login_tickets_expires_idx')
      .on('used_login_tickets')
      .column('expires_at')
      .execute();
  },
};
