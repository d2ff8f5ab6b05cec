import type { Connection, PageArgs } from '../../domain/connection.js';
import { membersOf, ordersOf } from '../../domain/connection-reads.js';
import type { Organization } from '../../domain/organizations.js';
import { mayReadOrganization } from '../../domain/user-policies.js';
import type { Role } from '../../store/types.js';
import { USERS_PAGE_SIZE, type User } from '../../domain/users.js';
import type { GraphQLContext } from '../context.js';
import { graphQLError, viaCore } from '../errors.js';
import { actorOf, readableOrganization, viewerOf } from './support.js';

const emptyConnection = <T>(): Connection<T> => ({
  edges: [],
  pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
  totalCount: () => Promise.resolve(0),
});

const lower = (role: string | null | undefined): Role | undefined =>
  role == null ? undefined : (role.toLowerCase() as Role);

export const userResolvers = {
  Query: {
    me: (_: unknown, __: unknown, ctx: GraphQLContext) => {
      const actor = actorOf(ctx);
      // A client-credentials token acts for the client itself: there is no user to answer with.
      if (actor.kind !== 'user')
        throw graphQLError(
          'FORBIDDEN',
          'me needs the credentials of a user; this token was issued to a client for itself.',
        );
      return viaCore(() => ctx.services.core.users.get(actor.id));
    },
    user: (_: unknown, args: { id: string }, ctx: GraphQLContext) => ctx.loaders.user.load(args.id),
    users: async (_: unknown, args: { role?: string | null; limit?: number | null }, ctx: GraphQLContext) => {
      const users = await viaCore(() =>
        ctx.services.core.users.page(viewerOf(ctx), {
          role: lower(args.role),
          limit: args.limit ?? USERS_PAGE_SIZE,
        }),
      );
      for (const u of users) ctx.loaders.user.prime(u.id, u);
      return users;
    },
  },
  Mutation: {
    updateUser: (
      _: unknown,
      args: { id: string; input: { name?: string | null; email?: string | null; role?: string | null } },
      ctx: GraphQLContext,
    ) => {
      const actor = actorOf(ctx);
      const { name, email, role } = args.input;
      return viaCore(() =>
        ctx.services.core.users.updateSelfService(actor, args.id, {
          // An explicit null is passed on for the core to refuse, not dropped as "no change".
          name: name as string | undefined,
          email: email as string | undefined,
          role:
            role === undefined
              ? undefined
              : role === null
                ? (null as unknown as Role)
                : (lower(role) as Role),
        }),
      );
    },
  },
  User: {
    __resolveReference: (ref: { id: string }, ctx: GraphQLContext) => ctx.loaders.user.load(ref.id),
    email: (user: User, _: unknown, ctx: GraphQLContext) => {
      const email = ctx.services.core.users.visibleEmail(viewerOf(ctx), user);
      if (email === null)
        throw graphQLError('FORBIDDEN', 'The email is visible only to the user themself or an admin.');
      return email;
    },
    username: (user: User) => user.handle,
    fullName: (user: User) => user.name || null,
    role: (user: User) => user.role.toUpperCase(),
    posts: (user: User, args: PageArgs, ctx: GraphQLContext) =>
      viaCore(async () =>
        args.after == null
          ? ((await ctx.loaders.authorPages.load(user.id, args.first)) ?? emptyConnection())
          : ctx.services.core.posts.listByAuthor(viewerOf(ctx), user.id, args),
      ),
    organization: async (user: User, _: unknown, ctx: GraphQLContext) => {
      const viewer = viewerOf(ctx);
      const own =
        viewer?.kind === 'user' ? ((await ctx.loaders.user.load(viewer.id))?.organizationId ?? null) : null;
      if (!mayReadOrganization(viewer, own, user.organizationId))
        throw graphQLError('FORBIDDEN', 'You may read only your own organization.');
      const org = await ctx.loaders.organization.load(user.organizationId);
      if (!org) throw graphQLError('NOT_FOUND', `Organization ${user.organizationId} not found.`);
      return org;
    },
    orders: async (
      user: User,
      args: { first?: number | null; after?: string | null },
      ctx: GraphQLContext,
    ) => {
      const actor = actorOf(ctx);
      const { core } = ctx.services;
      if (args.after != null) return viaCore(() => ordersOf(core.deps, core.orders, actor, user.id, args));
      const page = await viaCore(() => ctx.loaders.orderPages.load(user.id, args.first));
      if (!page) throw graphQLError('FORBIDDEN', 'You may list only your own orders.');
      return page;
    },
  },
  Organization: {
    __resolveReference: (ref: { id: string }, ctx: GraphQLContext) => readableOrganization(ctx, ref.id),
    // First pages for every organization of the operation in one batch (FirstPages, keyed by
    // organization and page size); a page after or before a cursor through the one-list pager.
    members: (org: Organization, args: PageArgs, ctx: GraphQLContext) =>
      viaCore(async () =>
        args.after == null && args.last == null && args.before == null
          ? ((await ctx.loaders.memberPages.load(org.id, args.first)) ?? emptyConnection())
          : membersOf(ctx.services.core.deps, org.id, args),
      ),
  },
};
