import type { FastifyRequest } from 'fastify';
import type { BruteForceGuard } from './brute-force.js';
import type { ClientService, OAuthClient } from './clients.js';
import { InvalidClient, InvalidRequest } from './errors.js';
import { sourceAddress, type Params } from './http.js';

export interface AuthenticatedClient {
  client: OAuthClient;
  method: 'client_secret_basic' | 'none';
}

interface BasicCredentials {
  id: string;
  secret: string;
}

/**
 * RFC 6749 §2.3.1: the client id and secret are form-urlencoded, then joined with ":" and
 * base64-encoded. Anything that does not decode cleanly is a failed authentication.
 */
export function parseBasic(header: string | undefined): BasicCredentials | null | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic +([A-Za-z0-9+/]+={0,2})$/i.exec(header.trim());
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  try {
    const formDecode = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return { id: formDecode(decoded.slice(0, colon)), secret: formDecode(decoded.slice(colon + 1)) };
  } catch {
    return null;
  }
}

/**
 * Identifies the client of a token-server request. Confidential clients authenticate with HTTP
 * Basic (the one method we offer: RFC 6749 §2.3 forbids mixing methods, and one method means one
 * place to get right); public clients name themselves with `client_id`. Every failure is the same
 * 401 invalid_client and counts against the client's and the address's failure budgets.
 */
export class ClientAuthenticator {
  constructor(
    private readonly clients: ClientService,
    private readonly guard: BruteForceGuard,
  ) {}

  async authenticate(
    request: FastifyRequest,
    params: Params | null,
    options: {
      allowPublic: boolean;
      /**
       * Any live client may name itself without a secret. Only for the JSON refresh endpoint, whose
       * spec shape carries just `client_id`: there the refresh token is the credential, bound to
       * its client and protected by rotation with reuse detection (RFC 9700 §4.14.2).
       */
      nameSuffices?: boolean;
    },
  ): Promise<AuthenticatedClient> {
    const authorization = request.headers.authorization;
    const basic = parseBasic(Array.isArray(authorization) ? authorization[0] : authorization);
    const bodyId = params?.single('client_id');
    const address = sourceAddress(request);
    if (params?.get('client_secret') !== undefined || params?.get('client_assertion') !== undefined) {
      await this.guard.check(bodyId, address);
      await this.guard.failed(bodyId, address);
      throw new InvalidClient(
        'Authenticate the client with HTTP Basic; client_secret_post and assertions are not supported.',
      );
    }

    if (basic !== undefined) {
      if (basic === null) {
        await this.guard.check(undefined, address);
        await this.guard.failed(undefined, address);
        throw new InvalidClient();
      }
      if (bodyId !== undefined && bodyId !== basic.id)
        throw new InvalidRequest('The client_id parameter does not match the authenticated client.');
      await this.guard.check(basic.id, address);
      const client = await this.clients.authenticate(basic.id, basic.secret);
      if (!client) {
        await this.guard.failed(basic.id, address);
        throw new InvalidClient();
      }
      await this.guard.succeeded(basic.id);
      return { client, method: 'client_secret_basic' };
    }

    if (bodyId === undefined || !options.allowPublic)
      throw new InvalidClient('Client authentication is required.');
    await this.guard.check(bodyId, address);
    const client = await this.clients.get(bodyId);
    // A confidential client naming itself without its secret is not authenticated.
    if (!client || (client.confidential && !options.nameSuffices)) {
      await this.guard.failed(bodyId, address);
      throw new InvalidClient();
    }
    return { client, method: 'none' };
  }
}
