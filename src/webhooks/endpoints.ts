import { type Actor, isAdmin } from '../domain/actor.js';
import { iso, unixSeconds } from '../domain/clock.js';
import { API_VERSION, type CoreDeps, inGivenTransaction, inTransaction, type Tx } from '../domain/context.js';
import { conflict, DomainError, forbidden, notFound, unprocessable } from '../domain/errors.js';
import { isId, newEventId, newId } from '../domain/ids.js';
import { userNotFound } from '../domain/users.js';
import { signalOutbox } from '../store/outbox-signal.js';
import type { Resolver } from './address-policy.js';
import { type Envelope, envelope, EVENT_TYPES, isEventType } from './event-types.js';
import { newSigningSecret, ROTATION_OVERLAP_MS } from './signing.js';
import { testEventData } from './test-events.js';
import { checkTargetUrl } from './target-url.js';
import { type EndpointRow, type EndpointView, endpointView } from './views.js';
import { eventDataText } from '../domain/event-data.js';

/** Every type, now and later: the default subscription. */
export const ALL_EVENTS = '*';
export const MAX_ENDPOINTS_PER_USER = 20;

export interface EndpointPolicy {
  /** WEBHOOK_ALLOW_PRIVATE: when false, targets must resolve to public addresses only. */
  allowPrivate: boolean;
  resolve?: Resolver;
}

export interface CreateEndpointInput {
  url: string;
  events?: string[] | undefined;
  /** Whose endpoint; only an admin (or the system) names someone else. Default: the caller. */
  userId?: string | undefined;
}

/** What `checkNew` found acceptable; only it makes one, so `register` never sees unchecked input. */
export interface CheckedEndpoint {
  readonly userId: string;
  readonly url: string;
  readonly events: readonly string[];
  readonly [checkedMark]: true;
}
declare const checkedMark: unique symbol;

export interface UpdateEndpointInput {
  url?: string | undefined;
  events?: string[] | undefined;
  /** true re-enables an endpoint disabled by a 410 (or by hand); false disables it. */
  enabled?: boolean | undefined;
}

export interface Page<T> {
  data: T[];
  hasMore: boolean;
  nextCursor: string | null;
}

/** Subscriptions: `["*"]` for every type, else known types, de-duplicated, in the spec's order. */
export function checkEventList(events: string[] | undefined): string[] {
  if (events === undefined || events.length === 0) return [ALL_EVENTS];
  if (events.includes(ALL_EVENTS)) {
    if (events.some((e) => e !== ALL_EVENTS)) {
      throw new DomainError('validation_error', '"*" subscribes to every type and stands alone.', [
        { field: 'events', message: '"*" must be the only entry', code: 'invalid_enum' },
      ]);
    }
    return [ALL_EVENTS];
  }
  const details = events.flatMap((e, i) =>
    isEventType(e)
      ? []
      : [
          {
            field: `events[${i}]`,
            message: `must be one of ${EVENT_TYPES.join(', ')} or *`,
            code: 'invalid_enum',
          },
        ],
  );
  if (details.length > 0) throw new DomainError('validation_error', 'Unknown event types.', details);
  return EVENT_TYPES.filter((t) => events.includes(t));
}

/**
 * Nothing is sent to a disabled endpoint (the worker fails its deliveries at once), so queueing
 * something for it by hand, a re-send or a test event, is refused rather than accepted and lost.
 */
export function assertEnabled(endpoint: Pick<EndpointRow, 'disabled_at'>): void {
  if (endpoint.disabled_at !== null) {
    throw conflict('The endpoint is disabled; enable it (PATCH enabled: true) before re-sending.');
  }
}

export const subscribes = (events: readonly string[], type: string): boolean =>
  events.includes(ALL_EVENTS) || events.includes(type);

/**
 * Webhook endpoints: the rules of who may register, read and change them. An endpoint belongs to a
 * user; its owner and admins act on it, anyone else gets 403, an unknown id 404.
 */
export class WebhookEndpoints {
  constructor(
    private readonly deps: CoreDeps,
    private readonly policy: EndpointPolicy,
  ) {}

  async create(actor: Actor, input: CreateEndpointInput): Promise<EndpointView & { secret: string }> {
    return this.register(await this.checkNew(actor, input));
  }

  /**
   * The checks of a new endpoint that need no database: who may register it, its events, its URL
   * (resolved, unless private targets are allowed). Run before any transaction is opened, since a DNS
   * lookup may take seconds and a transaction on SQLite holds the only connection.
   */
  async checkNew(actor: Actor, input: CreateEndpointInput): Promise<CheckedEndpoint> {
    const userId = input.userId ?? actor.id;
    if (userId !== actor.id && !isAdmin(actor)) {
      throw forbidden('You may register webhook endpoints only for yourself.');
    }
    if (actor.kind !== 'user' && input.userId === undefined) {
      throw forbidden('Webhook endpoints belong to users; a client acting for itself has none.');
    }
    const events = checkEventList(input.events);
    const url = await checkTargetUrl(input.url, this.policy.allowPrivate, this.policy.resolve);
    return { userId, url, events } as unknown as CheckedEndpoint;
  }

  /**
   * Registers a checked endpoint for an existing user with room for it, in the caller's
   * transaction `given` (an idempotent request stores its answer in it), else in one of its own.
   */
  async register(checked: CheckedEndpoint, given?: Tx): Promise<EndpointView & { secret: string }> {
    const { userId, url, events } = checked;
    return inGivenTransaction(this.deps, given, async (tx) => {
      // A field of the request naming no user: 422 on that field (as users' organization_id), worded
      // as every other unknown user is.
      const user = isId(userId, 'usr')
        ? await tx.db
            .selectFrom('users')
            .select('id')
            .where('id', '=', userId)
            .where('deleted_at', 'is', null)
            .executeTakeFirst()
        : undefined;
      if (!user) throw unprocessable('user_id', userNotFound(userId).message, 'unknown_user');
      const { count } = await tx.db
        .selectFrom('webhook_endpoints')
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .where('user_id', '=', userId)
        .executeTakeFirstOrThrow();
      if (Number(count) >= MAX_ENDPOINTS_PER_USER) {
        throw unprocessable(
          null,
          `A user may have at most ${MAX_ENDPOINTS_PER_USER} endpoints.`,
          'too_many_endpoints',
        );
      }
      const now = this.deps.clock.now();
      const row: EndpointRow = {
        id: newId('whe', now.getTime()),
        user_id: userId,
        url,
        events: JSON.stringify(events),
        secret: newSigningSecret(),
        disabled_at: null,
        disabled_reason: null,
        previous_secret: null,
        previous_secret_expires_at: null,
        created_at: iso(now),
        updated_at: iso(now),
      };
      await tx.db.insertInto('webhook_endpoints').values(row).execute();
      return { ...endpointView(row, now), secret: row.secret };
    });
  }

  async get(actor: Actor, id: string): Promise<EndpointView> {
    return endpointView(await this.owned(actor, id), this.deps.clock.now());
  }

  /** The caller's endpoints (an admin may name another user), newest first. */
  async list(
    actor: Actor,
    query: { userId?: string | undefined; limit: number; cursor?: string | undefined },
  ): Promise<Page<EndpointView>> {
    const userId = query.userId ?? actor.id;
    if (userId !== actor.id && !isAdmin(actor)) throw forbidden('You may list only your own endpoints.');
    const scope = `webhook_endpoints:${userId}`;
    const after = query.cursor === undefined ? undefined : this.deps.cursors.decode(scope, query.cursor);
    let q = this.deps.store.db.selectFrom('webhook_endpoints').selectAll().where('user_id', '=', userId);
    if (after) q = q.where('id', '<', after.id);
    const rows = await q
      .orderBy('id', 'desc')
      .limit(query.limit + 1)
      .execute();
    const now = this.deps.clock.now();
    const page = rows.slice(0, query.limit);
    const last = page[page.length - 1];
    const hasMore = rows.length > query.limit;
    return {
      data: page.map((r) => endpointView(r, now)),
      hasMore,
      nextCursor:
        hasMore && last ? this.deps.cursors.encode(scope, { id: last.id, createdAt: last.created_at }) : null,
    };
  }

  /**
   * Changes what the PATCH names, and only that, on the row as it is when written: read and write
   * are one transaction with the row locked (PostgreSQL; SQLite has one writer), so a change made
   * meanwhile by another request, another instance or the worker's disabling after a 410 is kept.
   */
  async update(actor: Actor, id: string, input: UpdateEndpointInput): Promise<EndpointView> {
    let url: string | undefined;
    if (input.url !== undefined) {
      // Checking the URL may take a DNS lookup of seconds, so it runs before the transaction (which
      // holds SQLite's only connection), after 403/404 and the events' check, as it always came.
      await this.owned(actor, id);
      if (input.events !== undefined) checkEventList(input.events);
      url = await checkTargetUrl(input.url, this.policy.allowPrivate, this.policy.resolve);
    }
    return inTransaction(this.deps, async (tx) => {
      const current = await this.owned(actor, id, tx.db, true);
      const now = this.deps.clock.now();
      const named: Partial<Pick<EndpointRow, 'url' | 'events' | 'disabled_at' | 'disabled_reason'>> = {};
      if (input.events !== undefined) named.events = JSON.stringify(checkEventList(input.events));
      if (url !== undefined) named.url = url;
      if (input.enabled === true) {
        named.disabled_at = null;
        named.disabled_reason = null;
      } else if (input.enabled === false && current.disabled_at === null) {
        named.disabled_at = iso(now);
        named.disabled_reason = 'disabled by its owner';
      }
      const changes = Object.fromEntries(
        Object.entries(named).filter(([k, v]) => current[k as keyof typeof named] !== v),
      ) as typeof named;
      // A change that alters nothing ({} or every value as it is) writes nothing, updated_at included.
      if (Object.keys(changes).length === 0) return endpointView(current, now);
      const next: EndpointRow = { ...current, ...changes, updated_at: iso(now) };
      await tx.db
        .updateTable('webhook_endpoints')
        .set({ ...changes, updated_at: next.updated_at })
        .where('id', '=', id)
        .execute();
      return endpointView(next, now);
    });
  }

  /**
   * Removes the endpoint with its deliveries and attempt records. Of two DELETEs at once both pass
   * the read; the one that finds the row gone when it deletes answers 404, as it would a moment later.
   */
  async delete(actor: Actor, id: string): Promise<void> {
    await this.owned(actor, id);
    const { numDeletedRows } = await this.deps.store.db
      .deleteFrom('webhook_endpoints')
      .where('id', '=', id)
      .executeTakeFirst();
    if (Number(numDeletedRows) === 0) throw notFound('Webhook endpoint', id);
  }

  /**
   * A new secret, shown once. The old one keeps signing for 24 hours, so deliveries carry two v1
   * signatures and a receiver can switch secrets at its own pace. The row is locked: two rotations
   * at once take turns, so the second's previous secret is the first's new one and every secret
   * handed out still signs.
   */
  async rotateSecret(actor: Actor, id: string, given?: Tx): Promise<EndpointView & { secret: string }> {
    return inGivenTransaction(this.deps, given, async (tx) => {
      const current = await this.owned(actor, id, tx.db, true);
      const now = this.deps.clock.now();
      const next: EndpointRow = {
        ...current,
        secret: newSigningSecret(),
        previous_secret: current.secret,
        previous_secret_expires_at: iso(new Date(now.getTime() + ROTATION_OVERLAP_MS)),
        updated_at: iso(now),
      };
      await tx.db
        .updateTable('webhook_endpoints')
        .set({
          secret: next.secret,
          previous_secret: next.previous_secret,
          previous_secret_expires_at: next.previous_secret_expires_at,
          updated_at: next.updated_at,
        })
        .where('id', '=', id)
        .execute();
      return { ...endpointView(next, now), secret: next.secret };
    });
  }

  /**
   * Queues a sample event of `type` for this one endpoint (whatever its subscriptions), through the
   * same outbox and schedule as real events. Returns the envelope that will be sent. A disabled
   * endpoint is refused (409), as for a re-send: nothing would be sent to it. The row is locked
   * until the event is queued, so a DELETE or a disabling PATCH waits and answers after it: a test
   * event is never accepted for an endpoint whose DELETE or PATCH has already answered.
   */
  async sendTest(actor: Actor, id: string, type: string, given?: Tx): Promise<Envelope> {
    if (!isEventType(type)) {
      throw new DomainError('validation_error', 'Unknown event type.', [
        { field: 'type', message: `must be one of ${EVENT_TYPES.join(', ')}`, code: 'invalid_enum' },
      ]);
    }
    return inGivenTransaction(this.deps, given, async (tx) => {
      const endpoint = await this.owned(actor, id, tx.db, true);
      assertEnabled(endpoint);
      const now = this.deps.clock.now();
      const event = {
        id: newEventId(now.getTime()),
        type,
        api_version: API_VERSION,
        owner_id: endpoint.user_id,
        data: eventDataText(testEventData(type, endpoint.user_id, now)),
        created: unixSeconds(now),
        created_at: iso(now),
        dispatched_at: null,
        target_endpoint_id: endpoint.id,
      };
      await tx.db.insertInto('events').values(event).execute();
      await signalOutbox(tx.db, this.deps.store.dialect);
      // In-process workers hear of it once it has committed, as of every recorded event.
      tx.afterCommit({ kind: 'event.recorded', eventId: event.id, type });
      return envelope(event);
    });
  }

  /**
   * The endpoint, if the actor may act on it: 404 when unknown, 403 when someone else's. With
   * `lock`, in a transaction, PostgreSQL holds the row against other writers until it ends (FOR NO
   * KEY UPDATE: the id never changes, so deliveries being queued for it need not wait); SQLite's
   * transaction already holds the only connection.
   */
  async owned(
    actor: Actor,
    id: string,
    db: Tx['db'] = this.deps.store.db,
    lock = false,
  ): Promise<EndpointRow> {
    let q = db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id);
    if (lock && this.deps.store.dialect === 'postgres') q = q.forNoKeyUpdate();
    const row = await q.executeTakeFirst();
    if (!row) throw notFound('Webhook endpoint', id);
    if (row.user_id !== actor.id && !isAdmin(actor))
      throw forbidden('This webhook endpoint belongs to another user.');
    return row;
  }
}
