import type { ClientService, OAuthClient } from './clients.js';
import { InvalidRequest, OAuthError, UnauthorizedClient, UnsupportedResponseType } from './errors.js';
import type { Params } from './http.js';
import { isValidS256Challenge } from './pkce.js';
import { overlappingScope } from './scope.js';

/** The parameters a login or consent form carries back to POST /authorize unchanged. */
export const CARRIED_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
] as const;

const MAX_STATE_LENGTH = 2048;

export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  state: string | undefined;
  scope: string[];
  codeChallenge: string;
  carried: Record<string, string | undefined>;
}

/**
 * Where a bad request goes. Until the client and redirect URI are proven, nothing may be sent to
 * the redirect URI (RFC 6749 §4.1.2.1: it could be an open redirector), so those failures are an
 * error page; after that, the error travels back to the client with `state`.
 */
export type Checked =
  | { kind: 'ok'; request: AuthorizationRequest }
  | { kind: 'page'; message: string }
  | { kind: 'redirect'; location: string };

export async function checkAuthorizationRequest(
  params: Params,
  clients: ClientService,
  issuer: string,
): Promise<Checked> {
  if (params.repeated.has('client_id'))
    return { kind: 'page', message: 'The client_id parameter is repeated.' };
  const clientId = params.get('client_id');
  if (clientId === undefined)
    return { kind: 'page', message: 'The request does not name a client (client_id).' };
  const client = await clients.get(clientId);
  if (!client) return { kind: 'page', message: 'The application that sent you here is not registered.' };
  if (params.repeated.has('redirect_uri'))
    return { kind: 'page', message: 'The redirect_uri parameter is repeated.' };
  const redirectUri = params.get('redirect_uri');
  if (redirectUri === undefined) return { kind: 'page', message: 'The request has no redirect_uri.' };
  // Exact string comparison (RFC 9700 §4.1.3): no normalising, no prefix or pattern matching.
  if (!client.redirectUris.includes(redirectUri)) {
    return { kind: 'page', message: 'The redirect_uri is not one this application registered.' };
  }

  const rawState = params.repeated.has('state') ? undefined : params.get('state');
  const state = rawState !== undefined && rawState.length <= MAX_STATE_LENGTH ? rawState : undefined;
  try {
    if (params.repeated.has('state')) throw new InvalidRequest('The state parameter is repeated.');
    if (rawState !== undefined && state === undefined)
      throw new InvalidRequest('The state parameter is too long.');
    const repeated = [...params.repeated];
    if (repeated.length > 0) throw new InvalidRequest(`Repeated parameters: ${repeated.join(', ')}.`);
    const responseType = params.get('response_type');
    if (responseType === undefined) throw new InvalidRequest('The response_type parameter is required.');
    if (responseType !== 'code') {
      throw new UnsupportedResponseType('Only response_type=code is supported (no implicit flow).');
    }
    if (params.get('request') !== undefined || params.get('request_uri') !== undefined) {
      throw new InvalidRequest('Request objects are not supported.');
    }
    const mode = params.get('response_mode');
    if (mode !== undefined && mode !== 'query')
      throw new InvalidRequest('Only response_mode=query is supported.');
    if (!client.grantTypes.includes('authorization_code')) {
      throw new UnauthorizedClient('This client may not use the authorization code flow.');
    }
    const method = params.get('code_challenge_method');
    const challenge = params.get('code_challenge');
    if (challenge === undefined)
      throw new InvalidRequest('PKCE is required: send code_challenge and code_challenge_method=S256.');
    if (method !== 'S256')
      throw new InvalidRequest('code_challenge_method must be S256 (plain is not allowed).');
    if (!isValidS256Challenge(challenge))
      throw new InvalidRequest('code_challenge must be a base64url SHA-256 (43 characters).');
    const scope = overlappingScope(params.get('scope'), client.scopes);
    const carried = Object.fromEntries(CARRIED_PARAMS.map((name) => [name, params.get(name)]));
    return { kind: 'ok', request: { client, redirectUri, state, scope, codeChallenge: challenge, carried } };
  } catch (err) {
    if (!(err instanceof OAuthError)) throw err;
    return {
      kind: 'redirect',
      location: redirectTo(redirectUri, {
        error: err.error,
        error_description: err.message,
        state,
        iss: issuer,
      }),
    };
  }
}

/**
 * The registered URI with the response appended to its query (RFC 6749 §4.1.2; `iss` per RFC 9207).
 * Spaces as %20, not the form encoding's `+`: both decode to a space in a query parser, but Swagger
 * UI and others show error_description without decoding `+` ("Scope+not+allowed"). The form
 * encoding writes a real `+` as %2B, so every `+` left in its output stands for a space.
 */
export function redirectTo(redirectUri: string, values: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  const added = new URLSearchParams(
    Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined),
  )
    .toString()
    .replace(/\+/g, '%20');
  if (added === '') return url.href;
  const existing = url.search.slice(1);
  url.search = existing === '' ? added : `${existing}&${added}`;
  return url.href;
}
