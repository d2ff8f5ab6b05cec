/**
 * Row types of every table. Timestamps are ISO 8601 UTC strings with milliseconds in both engines
 * (one representation everywhere; lexical order is time order). Money is integer cents. Flags are
 * integers 0/1 because SQLite has no boolean type. JSON columns hold serialised text.
 */
import type { Generated, Insertable, Selectable, Updateable } from 'kysely';

export type Role = 'admin' | 'member' | 'viewer';
export type Tier = 'free' | 'starter' | 'growth' | 'enterprise';
export type KeyMode = 'test' | 'live';
export type OrderStatus = 'PENDING' | 'PROCESSING' | 'SHIPPED' | 'DELIVERED' | 'CANCELLED';
export type Currency = 'USD' | 'EUR' | 'GBP';

export interface SettingsTable {
  key: string;
  value: string;
}

export interface OrganizationsTable {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export interface UsersTable {
  id: string;
  organization_id: string;
  handle: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  role: Role;
  password_hash: string | null;
  email_verified_at: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  key_hash: string;
  prefix: string;
  tier: Tier | null;
  mode: KeyMode;
  last_used_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

export interface OAuthClientsTable {
  id: string;
  name: string;
  secret_hash: string | null;
  redirect_uris: string; // JSON array of exact URIs
  scopes: string; // space-delimited allowed scopes
  grant_types: string; // space-delimited allowed grants
  first_party: number;
  user_id: string | null;
  created_at: string;
  revoked_at: string | null;
}

export interface AuthorizationCodesTable {
  id: string;
  code_hash: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  scope: string;
  code_challenge: string;
  expires_at: string;
  used_at: string | null;
  family_id: string | null;
  created_at: string;
}

/** Login tickets already used, kept until the ticket's own expiry (migration 0007). */
export interface UsedLoginTicketsTable {
  ticket_id: string;
  expires_at: string;
}

export interface RefreshTokenFamiliesTable {
  id: string;
  client_id: string;
  subject: string;
  scope: string;
  authorization_code_id: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
  created_at: string;
}

export interface RefreshTokensTable {
  id: string;
  family_id: string;
  token_hash: string;
  status: 'current' | 'used';
  expires_at: string;
  created_at: string;
  used_at: string | null;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: string;
  private_jwk: string;
  published_at: string;
  active_from: string;
  retired_at: string | null;
  created_at: string;
}

export interface PostsTable {
  id: string;
  author_id: string;
  title: string;
  body: string;
  published_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface TagsTable {
  name: string;
  created_at: string;
}

export interface PostTagsTable {
  post_id: string;
  tag_name: string;
}

export interface CommentsTable {
  id: string;
  post_id: string;
  author_id: string;
  body: string;
  created_at: string;
  updated_at: string;
}

export interface ProductsTable {
  id: string;
  name: string;
  price_cents: number;
  active: number;
  created_at: string;
  updated_at: string;
}

export interface CouponsTable {
  code: string;
  percent_off: number | null;
  amount_off_cents: number | null;
  active: number;
  created_at: string;
}

export interface OrdersTable {
  id: string;
  owner_id: string; // the caller's identity: a user id, or a client id for client-credentials callers
  currency: Currency;
  status: OrderStatus;
  subtotal_cents: number;
  discount_cents: number;
  amount_cents: number;
  coupon_code: string | null;
  shipping_address: string; // JSON ShippingAddress
  created_at: string;
  updated_at: string;
  /** 1 when the change that set `updated_at` fell in the same second as the change before it. */
  changed_twice_in_second: Generated<number>;
}

export interface OrderItemsTable {
  id: string;
  order_id: string;
  product_id: string;
  quantity: number;
  unit_price_cents: number;
  created_at: string;
}

export interface RefundsTable {
  id: string;
  order_id: string;
  amount_cents: number;
  created_at: string;
}

export interface IdempotencyRecordsTable {
  owner_id: string;
  idem_key: string;
  request_hash: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_body: string | null;
  response_headers: string | null;
  created_at: string;
  expires_at: string;
}

export interface WebhookEndpointsTable {
  id: string;
  user_id: string;
  url: string;
  events: string; // JSON array; empty means every event type
  secret: string;
  disabled_at: string | null;
  created_at: string;
  updated_at: string;
  /** The secret before the last rotation; still signs until previous_secret_expires_at. */
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  disabled_reason: string | null;
}

export interface EventsTable {
  id: string;
  type: string;
  api_version: string;
  owner_id: string | null;
  data: string; // JSON
  created: number; // Unix seconds, as the webhook envelope carries it
  created_at: string;
  dispatched_at: string | null;
  /** Set for an event meant for one endpoint only (send-test); null fans out to every match. */
  target_endpoint_id?: string | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: 'pending' | 'delivered' | 'failed';
  attempt_count: number;
  next_attempt_at: string | null;
  locked_until: string | null;
  last_status_code: number | null;
  created_at: string;
  updated_at: string;
  last_error: string | null;
  /** 1 for the automatic schedule; each manual re-send starts the next round. */
  round: Generated<number>;
}

export interface DeliveryAttemptsTable {
  id: string;
  delivery_id: string;
  attempt: number;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  created_at: string;
  response_excerpt: string | null;
  round: Generated<number>;
}

export interface PersistedQueriesTable {
  hash: string;
  query: string;
  created_at: string;
}

export interface Database {
  settings: SettingsTable;
  organizations: OrganizationsTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
  oauth_clients: OAuthClientsTable;
  authorization_codes: AuthorizationCodesTable;
  used_login_tickets: UsedLoginTicketsTable;
  refresh_token_families: RefreshTokenFamiliesTable;
  refresh_tokens: RefreshTokensTable;
  signing_keys: SigningKeysTable;
  posts: PostsTable;
  tags: TagsTable;
  post_tags: PostTagsTable;
  comments: CommentsTable;
  products: ProductsTable;
  coupons: CouponsTable;
  orders: OrdersTable;
  order_items: OrderItemsTable;
  refunds: RefundsTable;
  idempotency_records: IdempotencyRecordsTable;
  webhook_endpoints: WebhookEndpointsTable;
  events: EventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  persisted_queries: PersistedQueriesTable;
}

export type UserRow = Selectable<UsersTable>;
export type OrganizationRow = Selectable<OrganizationsTable>;
export type OrderRow = Selectable<OrdersTable>;
export type OrderItemRow = Selectable<OrderItemsTable>;
export type PostRow = Selectable<PostsTable>;
export type CommentRow = Selectable<CommentsTable>;
export type ProductRow = Selectable<ProductsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewEvent = Insertable<EventsTable>;
export type UserUpdate = Updateable<UsersTable>;
// Generated is re-exported so later tables with database-side defaults can use it.
export type { Generated };
