import type { FastifyInstance } from 'fastify';
import type { ServerRole, Services } from '../compose.js';
import { corsModule } from './cors.js';
import { docsModule } from './docs/module.js';
import { usersRouteModule } from './rest/users/routes.js';
import { ordersRouteModule } from './rest/orders/index.js';
import { protectedExampleRoutes } from './rest/protected/routes.js';
import { tokenServerRoutes } from '../oauth/routes.js';
import { graphqlModule } from '../graphql/module.js';
import { webhooksRouteModule } from './rest/webhooks/index.js';
import { sharedStateMetricsModule } from '../process/metrics-module.js';

/** A group of HTTP routes and the process roles that serve it. */
export interface RouteModule {
  name: string;
  roles: readonly ServerRole[];
  register(app: FastifyInstance, services: Services): Promise<void> | void;
}

/** Every HTTP surface, in registration order. A new surface adds one entry here. */
export const ROUTE_MODULES: RouteModule[] = [
  // First: the OpenAPI generator only sees routes registered after it.
  docsModule,
  corsModule,
  usersRouteModule,
  ordersRouteModule,
  protectedExampleRoutes,
  tokenServerRoutes,
  graphqlModule,
  webhooksRouteModule,
  sharedStateMetricsModule,
];
