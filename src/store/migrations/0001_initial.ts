import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * The whole data model of Atrium. One migration set serves SQLite and PostgreSQL; the only
 * engine-specific part is full-text search, which uses each engine's own facility.
 */
export function initial(dialect: Dialect) {
  return {
    // Migrations are written against the schema as it was then, not today's types.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('organizations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('users')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('handle', 'text', (c) => c.notNull().unique())
        .addColumn('email', 'text', (c) => c.notNull().unique())
        .addColumn('first_name', 'text')
        .addColumn('last_name', 'text')
        .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('admin', 'member', 'viewer')`))
        .addColumn('password_hash', 'text')
        .addColumn('email_verified_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      await db.schema.createIndex('users_org_idx').on('users').columns(['organization_id', 'id']).execute();
      await db.schema.createIndex('users_role_idx').on('users').columns(['role', 'id']).execute();

      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('tier', 'text')
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('last_used_at', 'text')
        .addColumn('revoked_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('api_keys_user_idx').on('api_keys').column('user_id').execute();

      await db.schema
        .createTable('oauth_clients')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('secret_hash', 'text')
        .addColumn('redirect_uris', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('grant_types', 'text', (c) => c.notNull())
        .addColumn('first_party', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('set null'))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('revoked_at', 'text')
        .execute();

      await db.schema
        .createTable('authorization_codes')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('code_hash', 'text', (c) => c.notNull().unique())
        .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id').onDelete('cascade'))
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('redirect_uri', 'text', (c) => c.notNull())
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('code_challenge', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('used_at', 'text')
        .addColumn('family_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('refresh_token_families')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('authorization_code_id', 'text')
        .addColumn('revoked_at', 'text')
        .addColumn('revoked_reason', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('refresh_tokens')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('family_id', 'text', (c) =>
          c.notNull().references('refresh_token_families.id').onDelete('cascade'),
        )
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('current', 'used')`))
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('used_at', 'text')
        .execute();
      await db.schema
        .createIndex('refresh_tokens_family_idx')
        .on('refresh_tokens')
        .column('family_id')
        .execute();

      await db.schema
        .createTable('signing_keys')
        .addColumn('kid', 'text', (c) => c.primaryKey())
        .addColumn('alg', 'text', (c) => c.notNull())
        .addColumn('public_jwk', 'text', (c) => c.notNull())
        .addColumn('private_jwk', 'text', (c) => c.notNull())
        .addColumn('published_at', 'text', (c) => c.notNull())
        .addColumn('active_from', 'text', (c) => c.notNull())
        .addColumn('retired_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('posts')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('author_id', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('published_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('posts_author_idx').on('posts').columns(['author_id', 'id']).execute();

      await db.schema
        .createTable('tags')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('post_tags')
        .addColumn('post_id', 'text', (c) => c.notNull().references('posts.id').onDelete('cascade'))
        .addColumn('tag_name', 'text', (c) => c.notNull().references('tags.name').onDelete('cascade'))
        .addPrimaryKeyConstraint('post_tags_pk', ['post_id', 'tag_name'])
        .execute();
      await db.schema
        .createIndex('post_tags_tag_idx')
        .on('post_tags')
        .columns(['tag_name', 'post_id'])
        .execute();

      await db.schema
        .createTable('comments')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('post_id', 'text', (c) => c.notNull().references('posts.id').onDelete('cascade'))
        .addColumn('author_id', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('comments_post_idx').on('comments').columns(['post_id', 'id']).execute();
      await db.schema.createIndex('comments_author_idx').on('comments').column('author_id').execute();

      await db.schema
        .createTable('products')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('price_cents', 'integer', (c) => c.notNull().check(sql`price_cents >= 0`))
        .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('coupons')
        .addColumn('code', 'text', (c) => c.primaryKey())
        .addColumn('percent_off', 'integer')
        .addColumn('amount_off_cents', 'integer')
        .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('orders')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('owner_id', 'text', (c) => c.notNull())
        .addColumn('currency', 'text', (c) => c.notNull().check(sql`currency in ('USD', 'EUR', 'GBP')`))
        .addColumn('status', 'text', (c) =>
          c.notNull().check(sql`status in ('PENDING', 'PROCESSING', 'SHIPPED', 'DELIVERED', 'CANCELLED')`),
        )
        .addColumn('subtotal_cents', 'integer', (c) => c.notNull())
        .addColumn('discount_cents', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('amount_cents', 'integer', (c) => c.notNull().check(sql`amount_cents >= 0`))
        .addColumn('coupon_code', 'text')
        .addColumn('shipping_address', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      // A caller's list, newest first, with and without the status filter.
      await db.schema
        .createIndex('orders_owner_created_idx')
        .on('orders')
        .columns(['owner_id', 'created_at', 'id'])
        .execute();
      await db.schema
        .createIndex('orders_owner_status_created_idx')
        .on('orders')
        .columns(['owner_id', 'status', 'created_at', 'id'])
        .execute();

      await db.schema
        .createTable('order_items')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('order_id', 'text', (c) => c.notNull().references('orders.id').onDelete('cascade'))
        .addColumn('product_id', 'text', (c) => c.notNull().references('products.id'))
        .addColumn('quantity', 'integer', (c) => c.notNull().check(sql`quantity between 1 and 1000`))
        .addColumn('unit_price_cents', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('order_items_order_idx')
        .on('order_items')
        .columns(['order_id', 'id'])
        .execute();

      await db.schema
        .createTable('refunds')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('order_id', 'text', (c) =>
          c.notNull().unique().references('orders.id').onDelete('cascade'),
        )
        .addColumn('amount_cents', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('idempotency_records')
        .addColumn('owner_id', 'text', (c) => c.notNull())
        .addColumn('idem_key', 'text', (c) => c.notNull())
        .addColumn('request_hash', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('in_progress', 'done')`))
        .addColumn('response_status', 'integer')
        .addColumn('response_body', 'text')
        .addColumn('response_headers', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_records_pk', ['owner_id', 'idem_key'])
        .execute();
      await db.schema
        .createIndex('idempotency_expires_idx')
        .on('idempotency_records')
        .column('expires_at')
        .execute();

      await db.schema
        .createTable('webhook_endpoints')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('events', 'text', (c) => c.notNull())
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('disabled_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('webhook_endpoints_user_idx')
        .on('webhook_endpoints')
        .column('user_id')
        .execute();

      await db.schema
        .createTable('events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('api_version', 'text', (c) => c.notNull())
        .addColumn('owner_id', 'text')
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('created', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('dispatched_at', 'text')
        .execute();
      await db.schema
        .createIndex('events_undispatched_idx')
        .on('events')
        .columns(['dispatched_at', 'id'])
        .execute();

      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('event_id', 'text', (c) => c.notNull().references('events.id').onDelete('cascade'))
        .addColumn('endpoint_id', 'text', (c) =>
          c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
        )
        .addColumn('status', 'text', (c) =>
          c.notNull().check(sql`status in ('pending', 'delivered', 'failed')`),
        )
        .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'text')
        .addColumn('locked_until', 'text')
        .addColumn('last_status_code', 'integer')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('webhook_deliveries_event_endpoint_uq', ['event_id', 'endpoint_id'])
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_due_idx')
        .on('webhook_deliveries')
        .columns(['status', 'next_attempt_at'])
        .execute();

      await db.schema
        .createTable('delivery_attempts')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('delivery_id', 'text', (c) =>
          c.notNull().references('webhook_deliveries.id').onDelete('cascade'),
        )
        .addColumn('attempt', 'integer', (c) => c.notNull())
        .addColumn('status_code', 'integer')
        .addColumn('duration_ms', 'integer', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('delivery_attempts_delivery_idx')
        .on('delivery_attempts')
        .columns(['delivery_id', 'attempt'])
        .execute();

      await db.schema
        .createTable('persisted_queries')
        .addColumn('hash', 'text', (c) => c.primaryKey())
        .addColumn('query', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      if (dialect === 'sqlite') {
        // FTS5 index over the searchable text of users, posts and comments, kept current by triggers.
        await sql`CREATE VIRTUAL TABLE search_index USING fts5(entity_id UNINDEXED, kind UNINDEXED, content, tokenize = 'porter unicode61')`.execute(
          db,
        );
        const sources = [
          {
            table: 'posts',
            kind: 'post',
            content: `coalesce(NEW.title, '') || ' ' || coalesce(NEW.body, '')`,
          },
          { table: 'comments', kind: 'comment', content: `coalesce(NEW.body, '')` },
          {
            table: 'users',
            kind: 'user',
            content: `NEW.handle || ' ' || coalesce(NEW.first_name, '') || ' ' || coalesce(NEW.last_name, '')`,
          },
        ];
        for (const s of sources) {
          await sql
            .raw(
              `CREATE TRIGGER ${s.table}_fts_ai AFTER INSERT ON ${s.table} BEGIN
                 INSERT INTO search_index (entity_id, kind, content) VALUES (NEW.id, '${s.kind}', ${s.content});
               END`,
            )
            .execute(db);
          await sql
            .raw(
              `CREATE TRIGGER ${s.table}_fts_au AFTER UPDATE ON ${s.table} BEGIN
                 DELETE FROM search_index WHERE entity_id = OLD.id;
                 INSERT INTO search_index (entity_id, kind, content) VALUES (NEW.id, '${s.kind}', ${s.content});
               END`,
            )
            .execute(db);
          await sql
            .raw(
              `CREATE TRIGGER ${s.table}_fts_ad AFTER DELETE ON ${s.table} BEGIN
                 DELETE FROM search_index WHERE entity_id = OLD.id;
               END`,
            )
            .execute(db);
        }
      } else {
        // Expression GIN indexes; the search query uses the same expressions so the planner picks them.
        await sql`CREATE INDEX posts_fts_idx ON posts USING gin (to_tsvector('english', title || ' ' || body))`.execute(
          db,
        );
        await sql`CREATE INDEX comments_fts_idx ON comments USING gin (to_tsvector('english', body))`.execute(
          db,
        );
        await sql`CREATE INDEX users_fts_idx ON users USING gin (to_tsvector('simple', handle || ' ' || coalesce(first_name, '') || ' ' || coalesce(last_name, '')))`.execute(
          db,
        );
      }
    },
  };
}
