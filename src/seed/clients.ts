import type { Services } from '../compose.js';
import { SWAGGER_OAUTH2_REDIRECT_PATH } from '../http/docs/paths.js';
import { ClientService, type CreatedClient } from '../oauth/clients.js';

export interface SeedClient extends CreatedClient {
  name: string;
  kind: 'confidential' | 'public';
}

/**
 * Two OAuth clients to try the token server with: a confidential web app (authorization code with
 * PKCE, refresh, and client credentials with its secret) and a public single-page app (PKCE, no
 * secret), which Swagger UI's "Authorize" on /docs can use too. Both go through the token server's
 * own ClientService, so they obey its redirect-URI and scope rules; it is stateless apart from the
 * store, so a local instance is the same service.
 */
export async function seedClients(services: Services, ownerId: string): Promise<SeedClient[]> {
  const clients = new ClientService(services.deps, services.config);
  const web = await clients.create({
    name: 'Atrium demo web app',
    redirectUris: ['http://127.0.0.1:8080/callback'],
    userId: ownerId,
  });
  // Swagger UI's Authorize button on /docs is a single-page app too: its redirect URI is on this
  // server (PUBLIC_URL), unless this configuration would refuse it (plain http in production).
  const docsRedirect = `${services.config.publicUrl}${SWAGGER_OAUTH2_REDIRECT_PATH}`;
  const spa = await clients.create({
    name: 'Atrium demo single-page app',
    redirectUris: [
      'http://localhost:5173/callback',
      ...(clients.redirectUriProblem(docsRedirect) === undefined ? [docsRedirect] : []),
    ],
    scopes: 'profile:read users:read content:read content:write orders:read',
    public: true,
    userId: ownerId,
  });
  return [
    { ...web, name: 'Atrium demo web app', kind: 'confidential' },
    { ...spa, name: 'Atrium demo single-page app', kind: 'public' },
  ];
}
