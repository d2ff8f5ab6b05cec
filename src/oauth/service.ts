import { OAuthBearerVerifier } from '../auth/bearer.js';
import type { Config } from '../config/schema.js';
import type { CoreDeps } from '../domain/context.js';
import type { Core } from '../domain/core.js';
import type { SharedStateHealth } from '../shared/health.js';
import type { SlidingWindowLimiter } from '../shared/rate-limiter.js';
import { BruteForceGuard, CLIENT_AUTH_FAILURES, LOGIN_FAILURES } from './brute-force.js';
import { ClientAuthenticator } from './client-auth.js';
import { ClientService } from './clients.js';
import { AuthorizationCodes } from './codes.js';
import { TokenIntrospector } from './introspection.js';
import { SigningKeys, type PublicJwk } from './keys.js';
import { RefreshTokens } from './refresh.js';
import {
  ACCESS_TOKEN_TTL_SECONDS,
  AccessTokens,
  CLOCK_TOLERANCE_SECONDS,
  hs256Keys,
  rs256Keys,
} from './tokens.js';

/** Everything the token server and the bearer check are made of, built once per process. */
export interface OAuth {
  config: Config;
  clients: ClientService;
  /** The RS256 key store; undefined in the HS256 variant, which has no published keys. */
  signingKeys: SigningKeys | undefined;
  tokens: AccessTokens;
  refresh: RefreshTokens;
  codes: AuthorizationCodes;
  clientAuth: ClientAuthenticator;
  loginGuard: BruteForceGuard;
  introspector: TokenIntrospector;
  bearer: OAuthBearerVerifier;
  jwks(): Promise<{ keys: PublicJwk[] }>;
}

export function createOAuth(input: {
  config: Config;
  deps: CoreDeps;
  core: Core;
  limiter: SlidingWindowLimiter;
  /** Where the brute-force guards report going ahead without Redis; without it they throw. */
  sharedHealth?: SharedStateHealth;
}): OAuth {
  const { config, deps, core, limiter, sharedHealth } = input;
  const clients = new ClientService(deps, config);
  // A key leaves the JWKS once the last token it signed (at retirement) has expired, plus leeway.
  const signingKeys =
    config.tokenSigning === 'rs256'
      ? new SigningKeys(deps.store, deps.clock, ACCESS_TOKEN_TTL_SECONDS + CLOCK_TOLERANCE_SECONDS + 300)
      : undefined;
  const keys = signingKeys ? rs256Keys(signingKeys) : hs256Keys(config.jwtSecret!);
  // The resource these tokens open is the API at PUBLIC_URL; the issuer is AUTH_URL.
  const tokens = new AccessTokens(keys, deps.clock, config.authUrl, config.publicUrl);
  const refresh = new RefreshTokens(deps);
  const codes = new AuthorizationCodes(deps, refresh);
  const clientAuth = new ClientAuthenticator(
    clients,
    new BruteForceGuard(limiter, 'client', CLIENT_AUTH_FAILURES, sharedHealth),
  );
  const loginGuard = new BruteForceGuard(limiter, 'login', LOGIN_FAILURES, sharedHealth);
  const introspector = new TokenIntrospector(tokens, refresh, clients, core.users);
  return {
    config,
    clients,
    signingKeys,
    tokens,
    refresh,
    codes,
    clientAuth,
    loginGuard,
    introspector,
    bearer: new OAuthBearerVerifier(introspector),
    jwks: async () => (signingKeys ? signingKeys.jwks() : { keys: [] }),
  };
}
