import type { Kysely } from 'kysely';

/** A user's activity stream (gRPC StreamUserActivity) reads events by owner, newest first and by time. */
export const grpcActivity = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.createIndex('events_owner_idx').on('events').columns(['owner_id', 'id']).execute();
  },
};
