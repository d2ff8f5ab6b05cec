import { type Actor, isAdmin } from '../domain/actor.js';
import { iso } from '../domain/clock.js';
import { type CoreDeps, inGivenTransaction, type Tx } from '../domain/context.js';
import { conflict, forbidden, notFound } from '../domain/errors.js';
import { signalOutbox } from '../store/outbox-signal.js';
import { assertEnabled, type Page, type WebhookEndpoints } from './endpoints.js';
import { type Envelope, envelope } from './event-types.js';
import { type AttemptView, attemptView, type DeliveryView, deliveryView } from './views.js';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/**
 * What happened to deliveries: the deliveries and attempt records of an endpoint or an event, and
 * manual re-sends. Visible to the endpoint's owner and admins, like the endpoint itself.
 */
export class WebhookDeliveries {
  constructor(
    private readonly deps: CoreDeps,
    private readonly endpoints: WebhookEndpoints,
  ) {}

  async listForEndpoint(
    actor: Actor,
    endpointId: string,
    query: { limit: number; cursor?: string | undefined; status?: DeliveryStatus | undefined },
  ): Promise<Page<DeliveryView>> {
    await this.endpoints.owned(actor, endpointId);
    const scope = `webhook_deliveries:${endpointId}:${query.status ?? '*'}`;
    const after = query.cursor === undefined ? undefined : this.deps.cursors.decode(scope, query.cursor);
    let q = this.deps.store.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .selectAll('d')
      .select('e.type as event_type')
      .where('d.endpoint_id', '=', endpointId);
    if (query.status) q = q.where('d.status', '=', query.status);
    if (after) q = q.where('d.id', '<', after.id);
    const rows = await q
      .orderBy('d.id', 'desc')
      .limit(query.limit + 1)
      .execute();
    return this.page(
      rows.map(deliveryView),
      query.limit,
      scope,
      (d) => d.id,
      (d) => d.created_at,
    );
  }

  /** Every attempt made to one endpoint, newest first. */
  async attemptsForEndpoint(
    actor: Actor,
    endpointId: string,
    query: { limit: number; cursor?: string | undefined },
  ): Promise<Page<AttemptView>> {
    await this.endpoints.owned(actor, endpointId);
    return this.attemptsPage('d.endpoint_id', endpointId, `webhook_attempts:${endpointId}`, 'desc', query);
  }

  /** The event's envelope, when the actor owns it (or is an admin). */
  async event(actor: Actor, eventId: string): Promise<Envelope> {
    const row = await this.deps.store.db
      .selectFrom('events')
      .selectAll()
      .where('id', '=', eventId)
      .executeTakeFirst();
    if (!row) throw notFound('Event', eventId);
    if (row.owner_id !== actor.id && !isAdmin(actor)) throw forbidden('This event belongs to another user.');
    return envelope(row);
  }

  /**
   * Every attempt to deliver one event, to every endpoint it went to, oldest first; paged like every
   * list, since each re-send adds up to five attempts per endpoint.
   */
  async attemptsForEvent(
    actor: Actor,
    eventId: string,
    query: { limit: number; cursor?: string | undefined },
  ): Promise<Page<AttemptView>> {
    await this.event(actor, eventId);
    return this.attemptsPage('d.event_id', eventId, `event_attempts:${eventId}`, 'asc', query);
  }

  /** One page of the attempts whose delivery has `column = value`, by (created_at, id) in `order`. */
  private async attemptsPage(
    column: 'd.endpoint_id' | 'd.event_id',
    value: string,
    scope: string,
    order: 'asc' | 'desc',
    query: { limit: number; cursor?: string | undefined },
  ): Promise<Page<AttemptView>> {
    const after = query.cursor === undefined ? undefined : this.deps.cursors.decode(scope, query.cursor);
    const beyond = order === 'asc' ? '>' : '<';
    let q = this.attemptQuery().where(column, '=', value);
    if (after) {
      q = q.where((eb) =>
        eb.or([
          eb('a.created_at', beyond, after.createdAt),
          eb.and([eb('a.created_at', '=', after.createdAt), eb('a.id', beyond, after.id)]),
        ]),
      );
    }
    const rows = await q
      .orderBy('a.created_at', order)
      .orderBy('a.id', order)
      .limit(query.limit + 1)
      .execute();
    return this.page(
      rows.map(attemptView),
      query.limit,
      scope,
      (a) => a.id,
      (a) => a.created_at,
    );
  }

  /**
   * Schedules a finished delivery again: a new round of up to five attempts at the usual times,
   * numbered from 1 again, with no last status or error until its first attempt. A pending delivery
   * is already scheduled (409), and a disabled endpoint must be re-enabled first (409). The endpoint
   * is locked until the delivery is scheduled, as for a test event, so a disabling PATCH or a DELETE
   * answers after the re-send, never before one it then lets through.
   */
  async resend(actor: Actor, endpointId: string, deliveryId: string, given?: Tx): Promise<DeliveryView> {
    return inGivenTransaction(this.deps, given, async (tx) => {
      const endpoint = await this.endpoints.owned(actor, endpointId, tx.db, true);
      const db = tx.db;
      const row = await db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('events as e', 'e.id', 'd.event_id')
        .selectAll('d')
        .select('e.type as event_type')
        .where('d.id', '=', deliveryId)
        .where('d.endpoint_id', '=', endpointId)
        .executeTakeFirst();
      if (!row) throw notFound('Delivery', deliveryId);
      assertEnabled(endpoint);
      if (row.status === 'pending') throw conflict('This delivery is still scheduled; it will be attempted.');
      const now = iso(this.deps.clock.now());
      const result = await db
        .updateTable('webhook_deliveries')
        .set({
          status: 'pending',
          round: row.round + 1,
          attempt_count: 0,
          next_attempt_at: now,
          locked_until: null,
          // The new round has no attempt yet: its last status and error are both empty, as for a
          // new delivery (keeping the old status beside no error read as a failure without cause).
          last_status_code: null,
          last_error: null,
          updated_at: now,
        })
        .where('id', '=', deliveryId)
        .where('round', '=', row.round)
        .where('status', '!=', 'pending')
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) {
        throw conflict('This delivery was re-sent at the same moment.');
      }
      await signalOutbox(db, this.deps.store.dialect);
      tx.afterCommit({ kind: 'event.recorded', eventId: row.event_id, type: row.event_type });
      return deliveryView({
        ...row,
        status: 'pending',
        round: row.round + 1,
        attempt_count: 0,
        next_attempt_at: now,
        last_status_code: null,
        last_error: null,
        updated_at: now,
      });
    });
  }

  private attemptQuery() {
    return this.deps.store.db
      .selectFrom('delivery_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .selectAll('a')
      .select(['d.event_id as event_id', 'd.endpoint_id as endpoint_id']);
  }

  private page<T>(
    items: T[],
    limit: number,
    scope: string,
    id: (t: T) => string,
    createdAt: (t: T) => string,
  ): Page<T> {
    const data = items.slice(0, limit);
    const last = data[data.length - 1];
    const hasMore = items.length > limit;
    return {
      data,
      hasMore,
      nextCursor:
        hasMore && last
          ? this.deps.cursors.encode(scope, { id: id(last), createdAt: createdAt(last) })
          : null,
    };
  }
}
