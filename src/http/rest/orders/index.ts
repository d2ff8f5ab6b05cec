import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../../compose.js';
import type { RouteModule } from '../../routes.js';
import { registerActions } from './actions.js';
import type { RouteContext } from './common.js';
import { registerCreate } from './create.js';
import { registerItems } from './items.js';
import { registerList } from './list.js';
import { registerRead } from './read.js';
import { registerUserOrders } from './user-orders.js';
import { VERSIONS } from './versions.js';
import { registerWrite } from './write.js';

const V1_PREFIX = '/api/v1';
/** Characters that may stand in a Link target as they are; anything else is percent-encoded. */
const URI_SAFE = /[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/g;

/**
 * Every /api/v1 response, errors, unknown paths and CORS preflights included, announces the
 * deprecation and names the v2 path of the same resource. An onSend hook at the root rather than a
 * scoped onRequest hook, because responses sent by earlier hooks (CORS, the caller step) and by the
 * not-found handler never reach a route's own hooks.
 */
export function registerV1Deprecation(app: FastifyInstance, sunset: Date): void {
  const sunsetHeader = sunset.toUTCString();
  // Callback style: no promise and microtask on every response, v2 included.
  app.addHook('onSend', (request, reply, payload, done) => {
    const path = request.url.split('?', 1)[0]!;
    if (path !== V1_PREFIX && !path.startsWith(`${V1_PREFIX}/`)) return done(null, payload);
    const successor = `/api/v2${path.slice(V1_PREFIX.length)}`.replace(URI_SAFE, (c) =>
      encodeURIComponent(c),
    );
    reply.header('deprecation', 'true');
    reply.header('sunset', sunsetHeader);
    reply.header('link', `<${successor}>; rel="successor-version"`);
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
