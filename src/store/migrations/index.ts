import type { Kysely, Migration, MigrationProvider } from 'kysely';
import type { Dialect } from '../dialect.js';
import { initial } from './0001_initial.js';
import { webhooks } from './0003_webhooks.js';
import { retention } from './0005_retention.js';
import { grpcActivity } from './0006_grpc.js';
import { loginTickets } from './0007_login_tickets.js';
import { orderSecondChanges } from './0008_order_second_changes.js';
import { searchVectors } from './0009_search_vectors.js';
import { eventsCreatedBigint } from './0010_events_created_bigint.js';
import { searchTokensMigration } from './0011_search_tokens.js';

/** Migrations in order. Names are permanent: a new change gets a new file and a new entry. */
export function migrationsFor(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_initial': initial(dialect) as { up(db: Kysely<unknown>): Promise<void> },
    '0003_webhooks': webhooks(dialect) as { up(db: Kysely<unknown>): Promise<void> },
    '0005_retention': retention() as { up(db: Kysely<unknown>): Promise<void> },
    '0006_grpc': grpcActivity,
    '0007_login_tickets': loginTickets,
    '0008_order_second_changes': orderSecondChanges,
    '0009_search_vectors': searchVectors(dialect) as { up(db: Kysely<unknown>): Promise<void> },
    '0010_events_created_bigint': eventsCreatedBigint(dialect) as { up(db: Kysely<unknown>): Promise<void> },
    '0011_search_tokens': searchTokensMigration(dialect) as { up(db: Kysely<unknown>): Promise<void> },
  };
}

export class StaticMigrationProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrationsFor(this.dialect);
  }
}
