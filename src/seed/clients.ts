import type { Services } from '../compose.js';
import { ClientService, type CreatedClient } from '../oauth/clients.js';

export interface SeedClient extends CreatedClient {
  name: string;
  kind: 'confidential' | 'public';
}

/**
 * Two OAuth clients to try the token server with: a confidential web app (authorization code with
 * PKCE, refresh, and client credentials with its secret) and a public single-page app (PKCE, no
 * secret). Both go through the token server's own ClientService, so they obey its redirect-URI and
 * scope rules; it is stateless apart from the store, so a local instance is the same service.
 */
export async function seedClients(services: Services, ownerId: string): Promise<SeedClient[]> {
  const clients = new ClientService(services.deps, services.config);
  const web = await clients.create({
    name: 'Atrium demo web app',
    redirectUris: ['http://127.0.0.1:8080/callback'],
    userId: ownerId,
  });
  const spa = await clients.create({
    name: 'Atrium demo single-page app',
    redirectUris: ['http://localhost:5173/callback'],
    scopes: 'profile:read users:read content:read content:write orders:read',
    public: true,
    userId: ownerId,
  });
  return [
    { ...web, name: 'Atrium demo web app', kind: 'confidential' },
    { ...spa, name: 'Atrium demo single-page app', kind: 'public' },
  ];
}
