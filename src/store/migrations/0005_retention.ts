import type { Kysely } from 'kysely';

/**
 * Indexes the purge job (src/maintenance/purge.ts) seeks on, so each bounded batch reads only the
 * rows it deletes instead of scanning the table. (Order and post paging needs none: the composite
 * (owner_id[, status], created_at, id) indexes and the primary key already match its seeks.)
 */
export function retention() {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createIndex('authorization_codes_expires_idx')
        .on('authorization_codes')
        .column('expires_at')
        .execute();
      await db.schema
        .createIndex('refresh_tokens_expires_idx')
        .on('refresh_tokens')
        .column('expires_at')
        .execute();
      await db.schema
        .createIndex('refresh_token_families_revoked_idx')
        .on('refresh_token_families')
        .column('revoked_at')
        .execute();
      await db.schema
        .createIndex('refresh_token_families_created_idx')
        .on('refresh_token_families')
        .column('created_at')
        .execute();
    },
  };
}
