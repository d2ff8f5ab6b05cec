import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createYoga } from 'graphql-yoga';
import type { Services } from '../compose.js';
import { headerValue } from '../http/auth.js';
import type { RouteModule } from '../http/routes.js';
import { createContext, type GraphQLContext } from './context.js';
import { buildAtriumSchema } from './schema.js';

interface ServerContext {
  req: FastifyRequest;
  reply: FastifyReply;
}

/**
 * Mounts GraphQL at /graphql. Skeleton: POST and GET through Yoga with the shared Authenticator.
 * The pipeline work replaces this with one pipeline every transport (POST, GET, WebSocket, SSE)
 * calls: limits, persisted queries, budgets and subscriptions.
 */
async function registerGraphQL(app: FastifyInstance, services: Services): Promise<void> {
  const schema = buildAtriumSchema();
  const yoga = createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    graphiql: false,
    logging: false,
    context: async ({ req }) => {
      const principal = await services.authenticator.authenticate({
        authorization: headerValue(req, 'authorization'),
        apiKey: headerValue(req, 'x-api-key'),
      });
      return createContext(services, principal, req.id);
    },
  });

  app.route({
    url: '/graphql',
    method: ['GET', 'POST', 'OPTIONS'],
    schema: { hide: true },
    handler: async (req, reply) => {
      const response = await yoga.handleNodeRequestAndResponse(req, reply, { req, reply });
      response.headers.forEach((value, key) => void reply.header(key, value));
      reply.status(response.status);
      reply.send(response.body);
      return reply;
    },
  });
}

export const graphqlModule: RouteModule = { name: 'graphql', roles: ['api'], register: registerGraphQL };
