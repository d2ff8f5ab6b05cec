import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { KyselyPlugin } from 'kysely';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { ApiKeyService } from './auth/api-keys.js';
import { Authenticator } from './auth/authenticator.js';
import { atBoundPort, awaitsBoundPort, type Config } from './config/schema.js';
import { type Clock, systemClock } from './domain/clock.js';
import type { CoreDeps } from './domain/context.js';
import { type Core, createCore } from './domain/core.js';
import { CursorCodec } from './domain/cursor.js';
import { DomainBus } from './events/bus.js';
import { createHttpApp } from './http/app.js';
import { HttpDrain } from './http/drain.js';
import type { GrpcServer } from './grpc/server.js';
import { type AfterAuthentication, type HttpAuth, httpAuth } from './http/auth.js';
import { documentedAuth } from './http/docs/security.js';
import { rateLimitStep } from './http/rate-limit.js';
import { invalidateUsersOnChange } from './http/rest/users/cache.js';
import { ROUTE_MODULES } from './http/routes.js';
import { createLogger } from './observability/logger.js';
import type { Broadcast } from './shared/broadcast.js';
import type { Cache } from './shared/cache.js';
import { createSharedState } from './shared/factory.js';
import type { SharedStateHealth } from './shared/health.js';
import {
  connectRedis,
  refuseMissingDatabase,
  refuseMissingPermission,
  refuseRedisLogin,
} from './shared/redis-connection.js';
import type { SlidingWindowLimiter } from './shared/rate-limiter.js';
import { createOAuth, type OAuth } from './oauth/service.js';
import { listenRefusal } from './process/listen-errors.js';
import { claimPort } from './process/port-claim.js';
import { checksFor, type ReadinessCheck } from './process/readiness.js';
import { firstContact } from './store/first-contact.js';
import { StoreOutageLog } from './store/outage-log.js';
import { openStore, type Store } from './store/store.js';
import { startPurgeJob } from './maintenance/purge.js';
import { startWebhookWorker } from './webhooks/index.js';

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
  /** Whether Redis answers, and what went ahead without it. */
  sharedHealth: SharedStateHealth;
  /** Carries out, before the process exits, cache invalidations Redis missed (src/shared/factory.ts). */
  flushCacheInvalidations(waitMs: number): Promise<number>;
  /**
   * The database outage as this process's requests meet it, whichever surface serves them (REST,
   * the token server and its sign-in pages, GraphQL, gRPC): logged once and its end once, not once
   * per request or per surface. The webhook worker and the purge job keep logs of their own, whose
   * lines say what paused.
   */
  storeOutage: StoreOutageLog;
  readiness: ReadinessCheck[];
  /** Closers run on shutdown, last registered first. */
  onClose: Array<() => Promise<void>>;
  /**
   * Run as the drain starts, before the surfaces close: work that must end within the drain limit
   * starts winding down from the signal, not from its turn in onClose.
   */
  onDrain: Array<() => void>;
  draining: boolean;
  /** ServicesOptions.wsKeepAliveMs: set by tests only. */
  wsKeepAliveMs: number | undefined;
  /** The Prometheus registry /metrics serves; anything in the process may report there. */
  metrics: Registry;
}

export interface ServicesOptions {
  clock?: Clock;
  logger?: Logger;
  /** Apply migrations before building (serve and tests do; `atrium migrate` does it itself). */
  migrate?: boolean;
  /** Kysely plugins over every query of the store (a test hook; nothing in production sets it). */
  storePlugins?: KyselyPlugin[];
  /** graphql-ws's ping interval (a test hook; production uses WS_KEEPALIVE_MS, src/graphql/transports/websocket.ts). */
  wsKeepAliveMs?: number;
}

const CURSOR_SECRET_SETTING = 'cursor_secret';
/**
 * The two lines of `Services.storeOutage`. They name no status: REST and the token server answer
 * 503, gRPC INTERNAL with retry-after (a storage failure, the spec says), GraphQL
 * SERVICE_UNAVAILABLE with retryAfter, with 503 at the credential check and at the field's path
 * when a resolver meets the outage (docs/deployment.md).
 */
const REQUEST_OUTAGE = { down: 'requests failing', up: 'requests served' };
/**
 * A process starts even when Redis is late; until it connects, limits fail open and caches read
 * through. A Redis that refuses the login stops the start at once instead (refuseRedisLogin).
 */
const REDIS_START_WAIT_MS = 5_000;
/**
 * How long a process about to exit waits for Redis to carry out cache invalidations it missed (a
 * user changed during an outage): a Redis that is back is seen within about 2 s (ioredis's
 * reconnection backoff). Spent only when something is owed, so a healthy shutdown waits nothing.
 */
const CACHE_FLUSH_WAIT_MS = 3_000;

/** Opens the store and builds the core and the shared services. */
export async function createServices(config: Config, options: ServicesOptions = {}): Promise<Services> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const store = openStore(config.databaseUrl, { plugins: options.storePlugins });
  try {
    const cursorKey = await firstContact(store, config.databaseUrl, async () => {
      if (options.migrate !== false) {
        const { newer } = await store.migrate();
        // A newer Atrium migrated the database (an upgrade under way, or a rollback): its
        // migrations are additive, so this build serves on; said once, at start.
        if (newer.length > 0)
          logger.warn(
            { newer_migrations: newer },
            `the database records migrations newer than this build (${newer.join(', ')}); running on it, as they are additive`,
          );
      }
      return loadCursorKey(store);
    });
    const clock = options.clock ?? systemClock;
    const bus = new DomainBus();
    const cursors = new CursorCodec(cursorKey);
    const deps: CoreDeps = { store, clock, bus, cursors };
    const core = createCore(deps);
    const apiKeys = new ApiKeyService(deps);
    const authenticator = new Authenticator(apiKeys);
    const redis = config.redisUrl ? connectRedis(config.redisUrl) : undefined;
    const shared = createSharedState(redis);
    const afterAuth: AfterAuthentication[] = [];
    const readiness: ReadinessCheck[] = [{ name: 'database', check: () => store.ping() }];
    // The worker's queue lives in the database; limits, caches and broadcast (Redis) serve requests.
    // Through the shared health: unavailable at once while Redis is known not to answer.
    if (redis)
      readiness.push({
        name: 'redis',
        check: async () => void (await shared.sharedHealth.call(() => redis.ping())),
        roles: ['api', 'auth', 'grpc'],
      });
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
      ...shared,
      storeOutage: new StoreOutageLog(logger, REQUEST_OUTAGE),
      readiness,
      onClose: [],
      onDrain: [],
      draining: false,
      wsKeepAliveMs: options.wsKeepAliveMs,
      metrics: new Registry(),
    };
    services.sharedHealth.useLogger(logger);
    if (redis) {
      const refusal = await services.sharedHealth.untilStarted(REDIS_START_WAIT_MS);
      if (refusal) refuseRedisLogin(redis, config.redisUrl!, refusal);
      await refuseMissingDatabase(redis, config.redisUrl!);
      await refuseMissingPermission(redis, config.redisUrl!, REDIS_START_WAIT_MS);
    }
    services.afterAuth.push(rateLimitStep(services.limiter, logger, services.sharedHealth));
    invalidateUsersOnChange(bus, services.cache, logger);
    services.oauth = createOAuth({
      config,
      deps,
      core,
      limiter: services.limiter,
      sharedHealth: services.sharedHealth,
    });
    authenticator.useBearerVerifier(services.oauth.bearer);
    services.onClose.push(() => store.close());
    // Ended by the first statement the database answers, whoever sent it (a request, /readyz,
    // gRPC health, a worker).
    const stopWatching = store.onAnswer(() => services.storeOutage.answered());
    services.onClose.push(async () => stopWatching());
    services.onClose.push(() => services.broadcast.close());
    if (redis) services.onClose.push(async () => void (await redis.quit().catch(() => redis.disconnect())));
    // Before the connection closes (closers run last registered first): an admin command that
    // changed a user while Redis was down has no later moment to drop the cached copy.
    if (redis)
      services.onClose.push(async () => {
        const owed = await services.flushCacheInvalidations(CACHE_FLUSH_WAIT_MS);
        if (owed === 0) return;
        logger.warn(
          { owed: owed === Infinity ? 'all' : owed, waited_ms: CACHE_FLUSH_WAIT_MS },
          'exiting with cache invalidations Redis missed: instances that lost Redis too drop every ' +
            'cached entry when it is back; one that kept Redis serves them until they expire (60 s)',
        );
      });
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
  grpc: GrpcServer | undefined;
  /** Starts listening on the configured ports. */
  listen(): Promise<{ httpUrl?: string; grpcAddress?: string }>;
  /**
   * Starts what works on its own (the worker role's webhook worker and purge job). createAtrium
   * does it unless told `deferWork`; again is a no-op.
   */
  startWork(): Promise<void>;
  /** Drains: stops accepting, finishes in-flight requests and streams, closes everything. */
  close(): Promise<void>;
}

export interface AtriumOptions extends ServicesOptions {
  /**
   * Leave the work to `startWork()`. `serve` starts it once the start is committed: a start
   * abandoned before then (a SIGTERM) has no delivery claimed and never sent.
   */
  deferWork?: boolean;
}

/** The composition root: one process serving the given roles. */
export async function createAtrium(
  configured: Config,
  roles: readonly ServerRole[] = SERVER_ROLES,
  options: AtriumOptions = {},
): Promise<Atrium> {
  // Every role answers /healthz, /readyz and /metrics over HTTP; api and auth add their routes.
  const wantsHttp = roles.length > 0;
  // PORT=0 with PUBLIC_URL or AUTH_URL left to their default: the port is bound before anything is
  // built, so the issuer, discovery and the OpenAPI servers name it from the start, the same for
  // the life of the process, and the HTTP server listens on that very socket.
  const claim =
    wantsHttp && awaitsBoundPort(configured)
      ? await claimPort(configured.host).catch((err: unknown) => {
          throw listenRefusal(err, {
            host: configured.host,
            port: 0,
            portSetting: 'PORT',
            hostSetting: 'HOST',
          });
        })
      : undefined;
  const config = claim ? atBoundPort(configured, claim.port) : configured;
  const services = await createServices(config, options).catch(async (err: unknown) => {
    await claim?.release();
    throw err;
  });
  let http: FastifyInstance | undefined;
  let httpDrain: HttpDrain | undefined;
  let work: Promise<void> | undefined;
  const startWork = () =>
    (work ??= (async () => {
      if (!roles.includes('worker')) return;
      // Retention: expired idempotency records, codes, refresh tokens and families (src/maintenance).
      const purge = startPurgeJob(services);
      services.onClose.push(() => purge.stop());
      // The webhook delivery worker (src/webhooks): stopped by close() through services.onClose.
      await startWebhookWorker(services);
    })());
  // Loaded only for the grpc role: the CLI's one-shot commands do not pay for grpc-js at start.
  const grpc = roles.includes('grpc')
    ? (await import('./grpc/server.js')).createGrpcServer(services)
    : undefined;
  try {
    if (wantsHttp) {
      http = createHttpApp({
        config,
        logger: services.logger,
        store: services.store,
        storeOutage: services.storeOutage,
        readiness: checksFor(services.readiness, roles),
        isDraining: () => services.draining,
        closesConnections: () => httpDrain?.closesConnections ?? false,
        metrics: services.metrics,
      });
      httpDrain = new HttpDrain(http.server);
      for (const module of ROUTE_MODULES) {
        if (module.roles.some((r) => roles.includes(r))) await module.register(http, services);
      }
      await http.ready();
    }
    if (!options.deferWork) await startWork();
  } catch (err) {
    await closeServices(services);
    await claim?.release();
    throw err;
  }

  let closed: Promise<void> | undefined;
  return {
    services,
    http,
    grpc,
    async listen() {
      const grpcAddress = grpc
        ? await grpc.listen().catch((err: unknown) => {
            throw listenRefusal(err, {
              host: config.host,
              port: config.grpcPort,
              portSetting: 'GRPC_PORT',
              hostSetting: 'HOST',
            });
          })
        : undefined;
      if (!http) return grpcAddress ? { grpcAddress } : {};
      const at = { host: config.host, port: config.port, ...claim?.handOver() };
      const address = await http.listen(at).catch((err: unknown) => {
        throw listenRefusal(err, {
          host: config.host,
          port: config.port,
          portSetting: 'PORT',
          hostSetting: 'HOST',
        });
      });
      return grpcAddress ? { httpUrl: address, grpcAddress } : { httpUrl: address };
    },
    startWork,
    close() {
      closed ??= (async () => {
        // A worker still starting registers its stop when it has started: close after that.
        await work?.catch(() => undefined);
        services.draining = true;
        for (const begin of services.onDrain) begin();
        grpc?.announceDrain();
        if (config.shutdownDelayMs > 0) {
          // Behind a balancer. First keep serving as usual (readiness 503) for balancers that watch
          // it; nginx only notices refused connections, so then refuse new connections, ask those in
          // use to end after their answer (Connection: close, HTTP/2 GOAWAY), and wait (up to the same
          // delay) for the balancer to close them: its idle ones too, which this process must not close
          // itself (a request written on one at that moment would be lost; src/http/drain.ts).
          await sleep(config.shutdownDelayMs);
          httpDrain?.stopAccepting();
          grpc?.stopAccepting();
          const until = Date.now() + config.shutdownDelayMs;
          services.logger.info(
            { http: httpDrain?.openConnections(), grpc: grpc?.openSessions() },
            'draining: new connections refused; waiting for open ones to end',
          );
          while (
            (httpDrain?.openConnections() ?? 0) + (grpc?.openSessions() ?? 0) > 0 &&
            Date.now() < until
          ) {
            await sleep(100);
            // Again: nginx (1.22) drops an HTTP/2 connection on a GOAWAY that arrives while it is idle,
            // but keeps reusing one that received it in the middle of a call.
            grpc?.stopAccepting();
          }
          services.logger.info(
            { http: httpDrain?.openConnections(), grpc: grpc?.openSessions() },
            'draining: closing what is left',
          );
        } else httpDrain?.closeAfterAnswers();
        // Connections that carry no request would hold the drain (Fastify closes only kept-alive
        // idle ones): a silent socket, a client trickling headers (src/http/drain.ts).
        httpDrain?.closeUnused();
        // Redis and the database pool close even when a surface fails to: left open, they would keep
        // the process alive after its drain gave up (Fastify's close rejects once a preClose hook
        // outlasts its pluginTimeout, 10 s).
        const surfaces = await Promise.allSettled([http?.close(), grpc?.close()]);
        await closeServices(services);
        await claim?.release();
        for (const s of surfaces) if (s.status === 'rejected') throw s.reason;
      })();
      return closed;
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
