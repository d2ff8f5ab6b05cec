import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { missingCredentials } from '../../../auth/authenticator.js';
import { type Principal, toActor } from '../../../auth/principal.js';
import type { Scope } from '../../../auth/scopes.js';
import type { Services } from '../../../compose.js';
import { ADMIN_ONLY_UPDATE, assertMayReadUser } from '../../../domain/user-policies.js';
import type { RouteModule } from '../../routes.js';
import { CALLER_VARY, CallerVaryHeaders } from '../common-schemas.js';
import { versionedOperationId } from '../orders/common.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';
import { restUser } from '../shapes.js';
import { restUserReads } from './cache.js';
import { USER_API_DIALECT, userApiErrorHandler } from './errors.js';
import { registerErrorDialect } from '../../errors.js';
import {
  OrganizationParams,
  OrganizationSchema,
  RestUserSchema,
  UpdateUserBody,
  UserParams,
  userApiErrors,
} from './schemas.js';

export const USER_CACHE_CONTROL = 'max-age=60, stale-while-revalidate=300';
const JSON_TYPE = 'application/json; charset=utf-8';

function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw missingCredentials();
  return request.principal;
}

/** Keeps what earlier steps (CORS) put in Vary. */
function addVary(reply: FastifyReply, ...names: string[]): void {
  const current = reply.getHeader('vary');
  const have = String(Array.isArray(current) ? current.join(',') : (current ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const n of names) if (!have.some((h) => h.toLowerCase() === n.toLowerCase())) have.push(n);
  reply.header('vary', have.join(', '));
}

/**
 * The user REST API. Credentials are checked on request, before the body is read, so a caller
 * without them gets 401 (and a non-admin's PATCH 403) whatever it sent.
 */
async function registerUserApi(app: FastifyInstance, services: Services): Promise<void> {
  const { core } = services;
  const cached = restUserReads({
    cache: services.cache,
    bus: services.bus,
    logger: services.logger,
    sharedCache: services.config.redisUrl !== undefined,
    foreignCommits: services.store.foreignCommits,
    health: services.sharedHealth,
  });
  const auth = (scope: Scope) => services.httpAuth.required(scope);
  // Decided before the body is read, so a non-admin gets 403 whatever it sent.
  const adminOnly: onRequestAsyncHookHandler = async (request) => {
    ADMIN_ONLY_UPDATE.assertCaller(toActor(principalOf(request)));
  };

  // Errors raised before any of these routes is found (`/v1/users/%ZZ`) speak the same case.
  registerErrorDialect(app, USER_API_DIALECT);
  await app.register(async (scope) => {
    const api = scope.withTypeProvider<TypeBoxTypeProvider>();
    api.setErrorHandler(userApiErrorHandler);

    api.get(
      '/v1/users/:user_id',
      {
        onRequest: auth('users:read'),
        config: { readOnly: true },
        schema: {
          tags: ['users'],
          operationId: 'getUser',
          summary: 'Get a user',
          description:
            'The caller themself or an admin; anyone else gets 403. May answer from a cache (`X-Cache: HIT` ' +
            'or `MISS`); any change to the user, from any API or process, clears it. On PostgreSQL ' +
            'without Redis there is no cache and every answer is a `MISS`.',
          params: UserParams,
          response: {
            200: {
              ...RestUserSchema,
              description: 'The user.',
              headers: {
                'Cache-Control': { type: 'string', description: USER_CACHE_CONTROL },
                'X-Cache': {
                  type: 'string',
                  enum: ['HIT', 'MISS'],
                  description: 'Whether the cache answered.',
                },
                ...CallerVaryHeaders,
              },
            },
            ...userApiErrors,
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const id = request.params.user_id;
        // Missing users answer 404 to everyone: ids are unguessable, so this reveals nothing.
        // A caller reading themself by API key was read by authentication a moment ago (request.users):
        // the core answers from that row, which saves the lookup on PostgreSQL without Redis, where
        // every read is a miss.
        const { json, hit } = await cached.read(id, async () =>
          JSON.stringify(restUser(await core.users.get(id, request.users))),
        );
        assertMayReadUser(toActor(principal), id);
        reply.header('cache-control', USER_CACHE_CONTROL).header('x-cache', hit ? 'HIT' : 'MISS');
        // Authenticated by header rather than cookie: a shared cache must key on the credentials.
        addVary(reply, ...CALLER_VARY);
        // The cached text is already the JSON body; sending it as is skips serialising it again.
        return reply.type(JSON_TYPE).send(json as never);
      },
    );

    api.patch(
      '/v1/users/:user_id',
      {
        onRequest: [auth('users:write'), adminOnly],
        schema: {
          tags: ['users'],
          operationId: 'updateUser',
          summary: 'Update a user (admin only)',
          description: 'Changes name, email or role. Only callers with role `admin`; others get 403.',
          params: UserParams,
          body: UpdateUserBody,
          response: {
            200: { ...RestUserSchema, description: 'The updated user.' },
            ...userApiErrors,
            409: { ...userApiErrors[404], description: 'Another user has this email (error `CONFLICT`).' },
          },
        },
      },
      async (request) => {
        const id = request.params.user_id;
        const user = await core.users.updateAsAdmin(toActor(principalOf(request)), id, request.body);
        // The bus clears it too; awaiting here means the very next read, anywhere, misses.
        await cached.invalidate(id);
        return restUser(user);
      },
    );

    api.get(
      '/v1/organizations/:organization_id',
      {
        onRequest: auth('users:read'),
        config: { readOnly: true },
        schema: {
          tags: ['users'],
          operationId: 'getOrganization',
          summary: 'Get an organization',
          description: 'Members of the organization and admins; anyone else gets 403.',
          params: OrganizationParams,
          response: { 200: { ...OrganizationSchema, description: 'The organization.' }, ...userApiErrors },
        },
      },
      async (request) => {
        const org = await core.organizations.read(
          toActor(principalOf(request)),
          request.params.organization_id,
        );
        return {
          id: org.id,
          name: org.name,
          created_at: org.createdAt,
          _links: { self: { href: `/v1/organizations/${org.id}` } },
        };
      },
    );
  });

  // The spec's URL conventions put the action under both versions; v1 answers alike, with the
  // deprecation headers every /api/v1 answer carries.
  for (const prefix of ['/api/v1', '/api/v2'] as const) {
    app.withTypeProvider<TypeBoxTypeProvider>().post(
      `${prefix}/users/:user_id/verify`,
      {
        onRequest: auth('users:write'),
        schema: idempotentSchema({
          tags: ['users'],
          deprecated: prefix === '/api/v1',
          operationId: versionedOperationId(prefix === '/api/v1' ? 'v1' : 'v2', 'verifyUser'),
          summary: "Verify a user's email",
          description:
            'The user themself or an admin. An action: 204 with no body; repeating it is harmless.',
          params: UserParams,
          response: {
            204: { type: 'null', description: 'Verified.' },
            ...userApiErrors,
            400: { ...userApiErrors[400], description: 'Invalid request (error `validation_error`).' },
            403: {
              ...userApiErrors[403],
              description:
                'Not the user themself nor an admin (`forbidden`), or credentials without `users:write` (`insufficient_scope`).',
            },
            404: { ...userApiErrors[404], description: 'No such user (error `not_found`).' },
          },
        }),
      },
      async (request, reply) => {
        const actor = toActor(principalOf(request));
        return sendIdempotent(services, request, reply, async (tx) => {
          await core.users.markEmailVerified(actor, request.params.user_id, tx);
          return { status: 204, body: null, headers: {} };
        });
      },
    );
  }
}

export const usersRouteModule: RouteModule = {
  name: 'users',
  roles: ['api'],
  register: registerUserApi,
};
