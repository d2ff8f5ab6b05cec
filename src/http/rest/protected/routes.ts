import { Type } from '@sinclair/typebox';
import type { RouteModule } from '../../routes.js';
import { standardErrors } from '../common-schemas.js';
import { idempotentSchema, sendIdempotent } from '../idempotent.js';

/** GET /api/user/profile (decisions §3): the caller as its credential describes it. */
export const ProfileSchema = Type.Object(
  {
    user_id: Type.String({
      description: 'The caller: a user id, or a client id for a client-credentials token.',
    }),
    scopes: Type.Array(Type.String(), { description: 'The scopes the credential carries, sorted.' }),
    token_expires: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'When the access token expires; null for an API key, which does not expire.',
    }),
  },
  { additionalProperties: false },
);

/** POST /api/data/export (decisions §3): accepted for later processing. */
export const ExportAcceptedSchema = Type.Object(
  {
    status: Type.Literal('accepted'),
    requested_by: Type.String({ description: 'The caller (user id, or client id).' }),
    client_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The OAuth client the token was issued to; null for an API key.',
    }),
  },
  { additionalProperties: false },
);

const errors = { 401: standardErrors[401], 403: standardErrors[403], 500: standardErrors[500] };

/**
 * The spec's scope-protected example routes (decisions §3). Either credential works; the scope
 * check and its 403 (and `WWW-Authenticate: Bearer error="insufficient_scope"`) come from the
 * shared caller step. The response schemas document the answers and serialize them.
 */
export const protectedExampleRoutes: RouteModule = {
  name: 'protected-examples',
  roles: ['api'],
  async register(app, services) {
    app.get(
      '/api/user/profile',
      {
        onRequest: services.httpAuth.required('profile:read'),
        schema: {
          tags: ['examples'],
          operationId: 'getProfile',
          summary: 'The caller as the token (or API key) describes it',
          response: { 200: { ...ProfileSchema, description: 'The caller.' }, ...errors },
        },
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
        schema: idempotentSchema({
          tags: ['examples'],
          operationId: 'requestDataExport',
          summary: 'Request a data export (accepted for later processing)',
          description: 'Takes no request body; the export is accepted and answered 202.',
          response: {
            202: { ...ExportAcceptedSchema, description: 'Accepted for later processing.' },
            400: { ...standardErrors[400], description: 'A body was sent that is not valid JSON.' },
            ...errors,
          },
        }),
      },
      async (request, reply) => {
        const principal = request.principal!;
        return sendIdempotent(services, request, reply, async () => ({
          status: 202,
          body: { status: 'accepted', requested_by: principal.id, client_id: principal.clientId },
          headers: {},
        }));
      },
    );
  },
};
