import type { Cache } from '../shared/cache.js';
import type { Core } from '../domain/core.js';
import type { UserActivity } from '../domain/activity.js';
import { Problems } from '../domain/errors.js';
import type { Role } from '../store/types.js';
import { dropCachedUser } from '../http/rest/users/cache.js';
import type { CallPipeline } from './call.js';
import type { UserServiceServer } from './gen/users/v1/users.gen.js';
import { requireUserId, toActivityMessage, toUserMessage, updateInput } from './messages.js';

/** How many users ListUsers reads per query while streaming: memory stays bounded whatever the table size. */
export const LIST_PAGE_SIZE = 100;

export interface UserServiceDeps {
  core: Core;
  activity: UserActivity;
  cache: Cache;
  /** How often an activity stream reads events committed by other instances. */
  activityPollMs?: number;
}

/**
 * users.v1.UserService: each method translates the request, calls the core and translates back.
 * Who may read or change what is the core's (users.read, updateSelfService, visibleEmail,
 * visibleOrganizationId).
 */
export function userServiceHandlers(pipeline: CallPipeline, deps: UserServiceDeps): UserServiceServer {
  const { core } = deps;
  return {
    getUser: pipeline.unary('GetUser', 'users:read', async (ctx, request) => {
      const user = await core.users.read(ctx.actor, requireUserId(request.userId), ctx.users);
      return toUserMessage(user, user.email);
    }),

    listUsers: pipeline.serverStream(
      'ListUsers',
      'users:read',
      async (ctx, request, send) => {
        const role = request.role === '' ? undefined : (request.role as Role);
        let cursor = request.cursor === '' ? undefined : request.cursor;
        // 0 means "no limit" here, so this surface checks limit; role and cursor are the core's.
        const problems = new Problems();
        if (request.limit < 0) problems.add('limit', 'limit must be 0 (no limit) or more', 'range_error');
        core.users.pageProblems({ role, cursor }, problems).throwIfAny();
        let remaining = request.limit > 0 ? request.limit : Infinity;
        let viewer = ctx.actor;
        let own = await core.users.organizationOf(viewer, ctx.users);
        while (remaining > 0 && !ctx.signal.aborted) {
          const page = await core.users.page(viewer, {
            role,
            cursor,
            limit: Math.min(LIST_PAGE_SIZE, remaining),
          });
          for (const user of page) {
            // Waits while the client is not reading: one page in memory at most.
            await send(
              toUserMessage(
                user,
                core.users.visibleEmail(viewer, user),
                core.users.visibleOrganizationId(viewer, own, user),
              ),
            );
            cursor = user.id;
            remaining -= 1;
          }
          if (page.length < LIST_PAGE_SIZE) break;
          // A long stream outlives a role: each page is read as the caller is now, so an admin
          // demoted (or a key revoked) mid-stream stops seeing what the old role showed.
          viewer = await ctx.recheck();
          own = await core.users.organizationOf(viewer);
        }
      },
      { endOnDrain: false },
    ),

    updateUser: pipeline.unary(
      'UpdateUser',
      'users:write',
      async (ctx, request) => {
        // The wire's problems (user_id, update_mask) and the core's (name, email, role) go out together.
        const problems = new Problems();
        const input = updateInput(request, problems);
        core.users.updateProblems(input, problems).throwIfAny();
        const user = await core.users.updateSelfService(ctx.actor, request.userId, input);
        // The bus clears every cached copy too; awaiting it here means the very next REST read misses.
        await dropCachedUser(deps.cache, user.id, ctx.log);
        return toUserMessage(user, user.email);
      },
      { writes: true },
    ),

    streamUserActivity: pipeline.serverStream(
      'StreamUserActivity',
      'users:read',
      async (ctx, request, send) => {
        const events = deps.activity.follow(ctx.actor, requireUserId(request.userId), {
          signal: ctx.signal,
          // Before each message: the credentials again, and the read rule for the caller as they are now.
          viewerNow: () => ctx.recheck(),
          ...(deps.activityPollMs === undefined ? {} : { pollMs: deps.activityPollMs }),
        });
        for await (const event of events) await send(toActivityMessage(event));
      },
      { endOnDrain: true },
    ),
  };
}
