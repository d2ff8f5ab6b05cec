import { ALL_SCOPES } from '../auth/scopes.js';
import { parse, required } from '../cli/args.js';
import type { AdminCommand } from '../cli/commands.js';
import type { Services } from '../compose.js';
import { DomainError, notFound, Problems } from '../domain/errors.js';
import { grantableBy } from './scope.js';

export interface OperatorTokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  /** The client the refresh token is bound to: POST /oauth/token/refresh needs it. */
  client_id: string;
}

/**
 * Tokens for a user without the browser flow, for operators and development. They carry only
 * scopes the user's role allows (and the client's, when one is named), like any other grant.
 */
export async function issueOperatorTokens(
  services: Services,
  input: { userId: string; scopes: string; clientId?: string | undefined },
): Promise<OperatorTokens> {
  const { oauth } = services;
  const user = await services.core.users.get(input.userId);
  const scopes = [...new Set(input.scopes.split(/\s+/).filter((s) => s !== ''))];
  const problems = new Problems();
  const unknown = scopes.filter((s) => !(ALL_SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0) problems.add('scopes', 'at least one scope is required');
  if (unknown.length > 0) problems.add('scopes', `unknown scopes: ${unknown.join(' ')}`, 'invalid_enum');
  problems.throwIfAny();
  const beyondRole = scopes.filter((s) => !grantableBy(user.role, [s]).length);
  if (beyondRole.length > 0) problems.add('scopes', `role ${user.role} cannot hold: ${beyondRole.join(' ')}`);

  let clientId: string;
  if (input.clientId !== undefined) {
    const client = await oauth.clients.get(input.clientId);
    if (!client) throw notFound('Client', input.clientId);
    const beyondClient = scopes.filter((s) => !client.scopes.includes(s));
    if (beyondClient.length > 0)
      problems.add('scopes', `client ${client.id} may not hold: ${beyondClient.join(' ')}`);
    if (!client.grantTypes.includes('refresh_token'))
      problems.add('client', 'the client may not use refresh tokens');
    clientId = client.id;
  } else {
    clientId = await oauth.clients.operatorClientId();
  }
  problems.throwIfAny();

  const family = await services.store.db.transaction().execute((trx) =>
    oauth.refresh.startFamily(trx, {
      clientId,
      subject: user.id,
      scope: scopes,
      authorizationCodeId: null,
    }),
  );
  const access = await oauth.tokens.issue({
    subject: user.id,
    clientId,
    scope: scopes,
    grantId: family.familyId,
  });
  return {
    access_token: access.token,
    refresh_token: family.token,
    expires_in: access.expiresIn,
    client_id: clientId,
  };
}

/** The token server's admin commands (decisions §2): each prints one JSON object. */
export const OAUTH_COMMANDS: Record<string, AdminCommand> = {
  'clients create': {
    synopsis:
      'clients create --name N [--redirect-uri URI]... [--scopes "a b"] [--public] [--first-party] [--user ID]',
    prepare: (argv) => {
      const { values } = parse(argv, {
        name: { type: 'string' },
        'redirect-uri': { type: 'string', multiple: true },
        scopes: { type: 'string' },
        public: { type: 'boolean' },
        'first-party': { type: 'boolean' },
        user: { type: 'string' },
      });
      const input = {
        name: required(values, 'name'),
        redirectUris: values['redirect-uri'] ?? [],
        scopes: values.scopes,
        public: values.public,
        firstParty: values['first-party'],
        userId: values.user,
      };
      return (s) => s.oauth.clients.create(input);
    },
  },

  'tokens issue': {
    synopsis: 'tokens issue --user ID --scopes "a b" [--client ID]',
    prepare: (argv) => {
      const { values } = parse(argv, {
        user: { type: 'string' },
        scopes: { type: 'string' },
        client: { type: 'string' },
      });
      const input = {
        userId: required(values, 'user'),
        scopes: required(values, 'scopes'),
        clientId: values.client,
      };
      return (s) => issueOperatorTokens(s, input);
    },
  },

  'signing-keys rotate': {
    synopsis: 'signing-keys rotate',
    prepare: (argv) => {
      parse(argv, {});
      return async (s) => {
        if (!s.oauth.signingKeys) {
          throw new DomainError(
            'conflict',
            'TOKEN_SIGNING=hs256 signs with JWT_SECRET; there are no signing keys to rotate.',
          );
        }
        return s.oauth.signingKeys.rotate();
      };
    },
  },
};
