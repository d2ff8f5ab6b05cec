import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../../compose.js';
import type { RouteModule } from '../../routes.js';
import { registerActions } from './actions.js';
import type { RouteContext } from './common.js';
import { registerCreate } from './create.js';
import { v1DeprecationHeaders } from './deprecation.js';
import { registerItems } from './items.js';
import { registerList } from './list.js';
import { registerRead } from './read.js';
import { registerUserOrders } from './user-orders.js';
import { VERSIONS } from './versions.js';
import { registerWrite } from './write.js';

/**
 * Every /api/v1 response, errors, unknown paths and CORS preflights included, announces the
 * deprecation and names the v2 path of the same resource. An onSend hook at the root rather than a
 * scoped onRequest hook, because responses sent by earlier hooks (CORS, the caller step) and by the
 * not-found handler never reach a route's own hooks. (A URL the router refuses gets them in the
 * app's frameworkErrors handler: no hook runs for it.)
 */
export function registerV1Deprecation(app: FastifyInstance, sunset: Date): void {
  // Callback style: no promise and microtask on every response, v2 included.
  app.addHook('onSend', (request, reply, payload, done) => {
    const headers = v1DeprecationHeaders(request.url, sunset);
    if (headers) {
      // A path no route serves has no v2 twin to name: deprecated still, but no successor link.
      // (A 405 names a path that exists, with other methods; it keeps its link.)
      if (request.is404 && reply.statusCode === 404) {
        reply.headers({ deprecation: headers.deprecation, sunset: headers.sunset });
      } else reply.headers(headers);
    }
    done(null, payload);
  });
}

/** The order REST API, v1 and v2, plus a user's order list. */
export const ordersRouteModule: RouteModule = {
  name: 'orders',
  roles: ['api'],
  async register(app: FastifyInstance, services: Services) {
    registerV1Deprecation(app, services.config.v1Sunset);
    const typed = app.withTypeProvider<TypeBoxTypeProvider>();
    for (const version of VERSIONS) {
      const context: RouteContext = { app: typed, services, version };
      registerList(context);
      registerCreate(context);
      registerRead(context);
      registerWrite(context);
      registerItems(context);
      registerActions(context);
    }
    await registerUserOrders(typed, services);
  },
};
