import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ApiKeyService } from './auth/api-keys.js';
import { Authenticator } from './auth/authenticator.js';
import type { Config } from './config/schema.js';
import { type Clock, systemClock } from './domain/clock.js';
import type { CoreDeps } from './domain/context.js';
import { type Core, createCore } from './domain/core.js';
import { CursorCodec } from './domain/cursor.js';
import { DomainBus } from './events/bus.js';
import { createHttpApp } from './http/app.js';
import { type AfterAuthentication, type HttpAuth, httpAuth } from './http/auth.js';
import type { ReadinessCheck } from './http/plugins/health.js';
import { documentedAuth } from './http/docs/security.js';
import { rateLimitStep } from './http/rate-limit.js';
import { invalidateUsersOnChange } from './http/rest/users/cache.js';
import { ROUTE_MODULES } from './http/routes.js';
import { createLogger } from './observability/logger.js';
import type { Broadcast } from './shared/broadcast.js';
import type { Cache } from './shared/cache.js';
import { createSharedState } from './shared/factory.js';
import type { SlidingWindowLimiter } from './shared/rate-limiter.js';
import { createOAuth, type OAuth } from './oauth/service.js';
import { openStore, type Store } from './store/store.js';

export const SERVER_ROLES = ['api', 'auth', 'grpc', 'worker'] as const;
export type ServerRole = (typeof SERVER_ROLES)[number];

/** Everything built from the configuration, shared by every surface and the CLI. */
export interface Services {
  config: Config;
  logger: Logger;
  store: Store;
  clock: Clock;
  bus: DomainBus;
  deps: CoreDeps;
  core: Core;
  apiKeys: ApiKeyService;
  authenticator: Authenticator;
  /** Clients, keys, tokens and the bearer check behind `authenticator`. */
  oauth: OAuth;
  /** Steps run after a caller is identified on every HTTP request (rate limiting). */
  afterAuth: AfterAuthentication[];
  httpAuth: HttpAuth;
  redis: Redis | undefined;
  /** Shared through Redis when it is configured, in this process otherwise. */
  limiter: SlidingWindowLimiter;
  cache: Cache;
  /** Messages to every instance (GraphQL subscriptions): Redis pub/sub or this process. */
  broadcast: Broadcast;
  readiness: ReadinessCheck[];
  /** Closers run on shutdown, last registered first. */
  onClose: Array<() => Promise<void>>;
  draining: boolean;
}

export interface ServicesOptions {
  clock?: Clock;
  logger?: Logger;
  /** Apply migrations before building (serve and tests do; `atrium migrate` does it itself). */
  migrate?: boolean;
}

const CURSOR_SECRET_SETTING = 'cursor_secret';

/** Opens the store and builds the core and the shared services. */
export async function createServices(config: Config, options: ServicesOptions = {}): Promise<Services> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const store = openStore(config.databaseUrl);
  try {
    if (options.migrate !== false) await store.migrate();
    const clock = options.clock ?? systemClock;
    const bus = new DomainBus();
    const cursors = new CursorCodec(await loadCursorKey(store));
    const deps: CoreDeps = { store, clock, bus, cursors };
    const core = createCore(deps);
    const apiKeys = new ApiKeyService(deps);
    const authenticator = new Authenticator(apiKeys);
    const redis = config.redisUrl
      ? new Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true })
      : undefined;
    redis?.on('error', (err) => logger.warn({ err: err.message }, 'redis error'));
    const afterAuth: AfterAuthentication[] = [];
    const readiness: ReadinessCheck[] = [{ name: 'database', check: () => store.ping() }];
    if (redis) readiness.push({ name: 'redis', check: async () => void (await redis.ping()) });
    const services: Services = {
      config,
      logger,
      store,
      clock,
      bus,
      deps,
      core,
      apiKeys,
      authenticator,
      // Built just below: it counts failed logins with the shared limiter made in this literal.
      oauth: undefined as unknown as OAuth,
      afterAuth,
      // Tagged so the OpenAPI document shows the scheme and scope each route really enforces.
      httpAuth: documentedAuth(httpAuth(authenticator, afterAuth)),
      redis,
      ...createSharedState(redis),
      readiness,
      onClose: [],
      draining: false,
    };
    services.afterAuth.push(rateLimitStep(services.limiter, logger));
    invalidateUsersOnChange(bus, services.cache, logger);
    services.oauth = createOAuth({ config, deps, core, limiter: services.limiter });
    authenticator.useBearerVerifier(services.oauth.bearer);
    services.onClose.push(() => store.close());
    services.onClose.push(() => services.broadcast.close());
    if (redis) services.onClose.push(async () => void (await redis.quit().catch(() => redis.disconnect())));
    return services;
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** The HMAC key for page cursors lives in the store so every instance accepts every other's cursors. */
async function loadCursorKey(store: Store): Promise<Buffer> {
  const read = () =>
    store.db
      .selectFrom('settings')
      .select('value')
      .where('key', '=', CURSOR_SECRET_SETTING)
      .executeTakeFirst();
  let row = await read();
  if (!row) {
    await store.db
      .insertInto('settings')
      .values({ key: CURSOR_SECRET_SETTING, value: randomBytes(32).toString('base64') })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    row = await read();
  }
  return Buffer.from(row!.value, 'base64');
}

export async function closeServices(services: Services): Promise<void> {
  for (const close of [...services.onClose].reverse()) {
    try {
      await close();
    } catch (err) {
      services.logger.warn({ err }, 'error while closing');
    }
  }
}

export interface Atrium {
  services: Services;
  http: FastifyInstance | undefined;
  /** Starts listening on the configured ports. */
  listen(): Promise<{ httpUrl?: string }>;
  /** Drains: stops accepting, finishes in-flight requests and streams, closes everything. */
  close(): Promise<void>;
}

/** The composition root: one process serving the given roles. */
export async function createAtrium(
  config: Config,
  roles: readonly ServerRole[] = SERVER_ROLES,
  options: ServicesOptions = {},
): Promise<Atrium> {
  const services = await createServices(config, options);
  let http: FastifyInstance | undefined;
  try {
    const wantsHttp = roles.some((r) => r === 'api' || r === 'auth');
    if (wantsHttp) {
      http = createHttpApp({
        config,
        logger: services.logger,
        store: services.store,
        readiness: services.readiness,
        isDraining: () => services.draining,
      });
      for (const module of ROUTE_MODULES) {
        if (module.roles.some((r) => roles.includes(r))) await module.register(http, services);
      }
      await http.ready();
    }
  } catch (err) {
    await closeServices(services);
    throw err;
  }

  let closed: Promise<void> | undefined;
  return {
    services,
    http,
    async listen() {
      if (!http) return {};
      const address = await http.listen({ host: config.host, port: config.port });
      return { httpUrl: address };
    },
    close() {
      closed ??= (async () => {
        services.draining = true;
        if (http) await http.close();
        await closeServices(services);
      })();
      return closed;
    },
  };
}
