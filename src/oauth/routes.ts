import type { RouteModule } from '../http/routes.js';
import { registerAuthorizeEndpoint } from './endpoints/authorize.js';
import { registerIntrospectionEndpoint } from './endpoints/introspect.js';
import { registerJwksEndpoint } from './endpoints/jwks.js';
import { registerMetadataEndpoint } from './endpoints/metadata.js';
import { registerRefreshJsonEndpoint } from './endpoints/refresh-json.js';
import { registerTokenEndpoint } from './endpoints/token.js';
import { oauthScope } from './http.js';

/** The token server at {auth_url}: served by processes with the `auth` role. */
export const tokenServerRoutes: RouteModule = {
  name: 'token-server',
  roles: ['auth'],
  async register(app, services) {
    const oauth = services.oauth;
    // Its own scope: a form parser that keeps the raw body, and RFC 6749 error bodies.
    await app.register(async (scope) => {
      oauthScope(scope);
      registerTokenEndpoint(scope, services, oauth);
      registerRefreshJsonEndpoint(scope, services, oauth);
      registerIntrospectionEndpoint(scope, oauth);
      registerJwksEndpoint(scope, oauth);
      registerMetadataEndpoint(scope, oauth);
      await registerAuthorizeEndpoint(scope, services, oauth);
    });
  },
};
