import type { RouteModule } from '../../routes.js';

/**
 * The spec's scope-protected example routes (decisions §3). Either credential works; the scope
 * check and its 403 (and `WWW-Authenticate: Bearer error="insufficient_scope"`) come from the
 * shared caller step.
 */
export const protectedExampleRoutes: RouteModule = {
  name: 'protected-examples',
  roles: ['api'],
  async register(app, services) {
    app.get(
      '/api/user/profile',
      {
        onRequest: services.httpAuth.required('profile:read'),
        schema: { tags: ['examples'], summary: 'The caller as the token (or API key) describes it' },
      },
      async (request) => {
        const principal = request.principal!;
        return {
          user_id: principal.id,
          scopes: [...principal.scopes].sort(),
          // An API key does not expire, so there is no time to give.
          token_expires: principal.tokenExpiresAt ? principal.tokenExpiresAt.toISOString() : null,
        };
      },
    );

    app.post(
      '/api/data/export',
      {
        onRequest: services.httpAuth.required('data:export'),
        schema: { tags: ['examples'], summary: 'Request a data export (accepted for later processing)' },
      },
      async (request, reply) => {
        const principal = request.principal!;
        return reply.code(202).send({
          status: 'accepted',
          requested_by: principal.id,
          client_id: principal.clientId,
        });
      },
    );
  },
};
