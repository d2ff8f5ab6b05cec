import { sql, type SqlBool } from 'kysely';
import type { Actor } from './actor.js';
import { ChildList } from './child-lists.js';
import type { Connection, PageArgs } from './connection.js';
import { lazyCount, lazyEdge, MAX_PAGE_SIZE, pageInfoOf } from './connection.js';
import type { CoreDeps } from './context.js';
import { Problems } from './errors.js';
import type { Order } from './order-model.js';
import type { OrderService } from './orders.js';
import { toUser, type User } from './users.js';

/**
 * Connections the graph surfaces need beside posts and comments: an organization's members and a
 * user's orders, under the same paging rules (sizes 0 to 100, signed cursors, totalCount).
 */
export const MEMBERS_PAGE_SIZE = 20;
export const ORDERS_PAGE_SIZE = 10;

/** Live members of an organization by id ascending, in the cursor scope `members:<organization id>`. */
const membersByOrganization = new ChildList({
  table: 'users',
  parent: 'organization_id',
  order: 'asc',
  defaultSize: MEMBERS_PAGE_SIZE,
  scope: (organizationId) => `members:${organizationId}`,
});
const live = sql<SqlBool>`users.deleted_at is null`;

/** Live members of an organization by id ascending. Who may read the organization is asked first. */
export function membersOf(deps: CoreDeps, organizationId: string, args: PageArgs): Promise<Connection<User>> {
  return membersByOrganization.page(deps.cursors, deps.store.db, organizationId, args, toUser, live);
}

/**
 * First pages of members for many organizations in two queries (a data loader's batch), whose
 * cursors continue with `membersOf`. Who may read each organization is asked first, as for
 * `membersOf`. Until 2026-11-28 every `Organization.members` was read on its own: two statements
 * per user in `users { organization { members { ... } } }`, however few organizations they shared.
 */
export function firstMemberPages(
  deps: CoreDeps,
  organizationIds: readonly string[],
  first?: number | null,
): Promise<Map<string, Connection<User>>> {
  return membersByOrganization.firstPages(deps.cursors, deps.store.db, organizationIds, first, toUser, live);
}

/**
 * A user's orders newest first as a connection. The order service decides who may list them (the
 * user themself or an admin) and pages them; this adds per-edge cursors in the service's own cursor
 * scope (so any edge's cursor continues the list) and the total.
 */
export async function ordersOf(
  deps: CoreDeps,
  orders: OrderService,
  actor: Actor,
  userId: string,
  args: { first?: number | null | undefined; after?: string | null | undefined },
): Promise<Connection<Order>> {
  const first = args.first ?? ORDERS_PAGE_SIZE;
  if (!Number.isInteger(first) || first < 0 || first > MAX_PAGE_SIZE) {
    new Problems()
      .add('first', `first must be an integer from 0 to ${MAX_PAGE_SIZE}`, 'range_error')
      .throwIfAny();
  }
  const page = await orders.listForUser(actor, userId, {
    limit: Math.max(first, 1),
    cursor: args.after ?? undefined,
  });
  const list = first === 0 ? [] : page.orders;
  // The scope the order service signs its cursors with for the default sort and no status filter.
  const scope = `orders:${userId}:-created_at:*`;
  const edges = list.map((o) => lazyEdge(o, deps.cursors, scope, { id: o.id, createdAt: o.createdAt }));
  return {
    edges,
    pageInfo: pageInfoOf(edges, first === 0 ? page.orders.length > 0 : page.hasMore, args.after != null),
    totalCount: lazyCount(async () => {
      const row = await deps.store.db
        .selectFrom('orders')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('owner_id', '=', userId)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    }),
  };
}
