import { type Command, Redis, type RedisOptions } from 'ioredis';
import { withoutPassword } from '../config/redact.js';
import { ConfigError } from '../config/schema.js';
import {
  isPermissionRefusal,
  isSelectRefusal,
  PASSWORD_NOT_NEEDED,
  REDIS_CALL_TIMEOUT_MS,
  untilReadyOrRefused,
} from './health.js';
import { refusedPermission, TIMED_OUT, within } from './redis-permissions.js';

/**
 * A connection that waits on Redis this long with commands outstanding and nothing received is
 * dropped and made again (ioredis `socketTimeout`). A hung Redis keeps its TCP connections open
 * but silent, so without this a connection whose replies will never come (a network path that
 * lost its state) would never be replaced, and a reconnection whose ready check hangs would wait
 * forever. Four times REDIS_CALL_TIMEOUT_MS: callers have long given up by then (and fail at once
 * meanwhile), while a server that is merely slow for a moment keeps its connection.
 */
export const REDIS_SOCKET_TIMEOUT_MS = 4 * REDIS_CALL_TIMEOUT_MS;

/**
 * The process's connection to Redis. Commands wait for a reconnection only briefly
 * (`maxRetriesPerRequest`), and the callers of src/shared never wait on it at all
 * (SharedStateHealth.call fails at once while it is not ready or not answering).
 *
 * A command still unanswered when its connection is dropped is not sent again on the next one
 * (`autoResendUnfulfilledCommands`, on by default in ioredis): its caller gave up on it after
 * REDIS_CALL_TIMEOUT_MS, long before the socket timeout, and went ahead without it. Sent again, it
 * would run late and may run twice, since a hung server still reads what the old connection had
 * delivered once it answers again: a comment event published as Redis hung reached every
 * instance's subscribers twice once it answered (at most once, the spec says;
 * test/integration/graphql/subscriptions-redis-hang.test.ts), and a rate-limit count or a cache
 * write would likewise land late or twice. The broadcast's listening connection is the exception
 * (src/shared/redis-broadcast.ts): its SUBSCRIBE must be sent again.
 */
export function connectRedis(url: string): Redis {
  return new QuietAuthRedis(url, {
    lazyConnect: false,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    socketTimeout: REDIS_SOCKET_TIMEOUT_MS,
    autoResendUnfulfilledCommands: false,
  });
}

/** Redis's two answers to an AUTH with a password when the server (or its `default` user) has none. */
const NO_PASSWORD_SET = /no password is set|without any password configured for the default user/;

/**
 * A connection that reports a password Redis does not need as an event instead of a console line.
 * ioredis takes that answer to its AUTH as harmless (it goes on, unauthenticated, which works) but
 * says so with `console.warn("[WARN] This Redis server's `default` user does not require a password,
 * but a password was supplied")`: plain text on stderr, in the middle of the process's JSON lines
 * (one JSON object a line, D11), on every connection and reconnection. So the AUTH command's
 * refusal is taken as the success ioredis makes of it anyway, before ioredis sees it, and emitted
 * as PASSWORD_NOT_NEEDED, which SharedStateHealth logs once, as a pino warning. Done on this
 * connection's own commands, not by replacing `console.warn` for the whole process. Its duplicates
 * (the broadcast's listening connection) do the same and report on this one.
 */
class QuietAuthRedis extends Redis {
  constructor(url: string | undefined, options: RedisOptions) {
    if (url === undefined) super(options);
    else super(url, options);
  }

  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    // ioredis's ready check sends INFO; refused (NOPERM: Atrium needs no INFO, so a user may well
    // lack it) ioredis skips the check, which is right, but says so with a console.warn, plain text
    // among the JSON lines, on every connection. An empty INFO is what it makes of the refusal.
    if (command.name === 'info' && command.args.length === 0) {
      const reject = command.reject;
      command.reject = (err: Error) => {
        if (!isPermissionRefusal(err)) return reject(err);
        command.resolve('');
      };
    }
    if (command.name === 'auth') {
      const reject = command.reject;
      command.reject = (err: Error) => {
        if (!NO_PASSWORD_SET.test(err.message)) return reject(err);
        this.emit(PASSWORD_NOT_NEEDED, err);
        command.resolve('OK');
      };
    }
    return super.sendCommand(command, stream);
  }

  override duplicate(override?: Partial<RedisOptions>): Redis {
    const copy = new QuietAuthRedis(undefined, { ...this.options, ...override });
    copy.on(PASSWORD_NOT_NEEDED, (err: Error) => this.emit(PASSWORD_NOT_NEEDED, err));
    return copy;
  }
}

/**
 * At start, once connected: the database index REDIS_URL names must exist on the server (`/99` where
 * it has 16). ioredis sends the SELECT as it connects and, refused, goes on in database 0 while every
 * readiness check fails: a process that never becomes ready, for a setting. So the start sends it
 * once more and stops, naming REDIS_URL, on the server's refusal; the connection is closed so the
 * process can exit. A Redis not connected yet is not checked (a late Redis only degrades).
 */
export async function refuseMissingDatabase(
  redis: Redis,
  url: string,
  variable = 'REDIS_URL',
): Promise<void> {
  const db = Number(redis.options.db ?? 0);
  if (redis.status !== 'ready' || db === 0) return;
  try {
    await redis.select(db);
  } catch (err) {
    if (!isSelectRefusal(err)) return;
    if (isPermissionRefusal(err)) refuseRedisPermission(redis, url, err as Error, variable);
    redis.disconnect();
    throw new ConfigError(
      variable,
      `a database index this Redis server has (SELECT ${db}: ${(err as Error).message})`,
      withoutPassword(url),
    );
  }
}

/**
 * The start's error for a Redis that refuses the login `url` gives (SharedStateHealth.untilStarted):
 * WRONGPASS, NOAUTH, an ACL user the server does not have. Like a database that refuses its login
 * (src/store/first-contact.ts), it stops the start with one line naming the variable, the URL with
 * its password masked, and Redis's reason, where an unreachable Redis only degrades: Redis answered,
 * and will refuse every reconnection the same way until the setting changes. The connection is
 * closed so the process can exit.
 */
export function refuseRedisLogin(redis: Redis, url: string, refusal: Error, variable = 'REDIS_URL'): never {
  redis.disconnect();
  throw new ConfigError(
    variable,
    `a user and password this Redis server accepts (${refusal.message})`,
    withoutPassword(url),
  );
}

/**
 * At start, once connected: stops the start, like a refused login (refuseRedisLogin), when the ACL
 * user REDIS_URL gives logs in but may not run a command Atrium sends, or touch its keys or
 * channels (src/shared/redis-permissions.ts). Let by, such a process reads /readyz as ready (PING
 * may be allowed) while its limits and caches are off and its broadcasts go nowhere, for good.
 * A Redis not connected yet is not checked (a late Redis only degrades).
 */
export async function refuseMissingPermission(
  redis: Redis,
  url: string,
  ms: number,
  variable = 'REDIS_URL',
): Promise<void> {
  if (redis.status !== 'ready') return;
  const refusal = await refusedPermission(redis, ms);
  if (refusal) refuseRedisPermission(redis, url, refusal, variable);
}

function refuseRedisPermission(redis: Redis, url: string, refusal: Error, variable = 'REDIS_URL'): never {
  redis.disconnect();
  throw new ConfigError(
    variable,
    'a Redis user allowed the commands, keys (atrium:*) and channels (atrium:*) Atrium uses ' +
      `(${refusal.message}; see docs/deployment.md)`,
    withoutPassword(url),
  );
}

/**
 * For `atrium cluster`, before it starts any process: connects to `url` once (no reconnection) and
 * stops the start, naming `variable`, when Redis cannot be reached or does not answer a PING within
 * `ms`, and, as each process would at its own start, when it refuses the login, lacks the database
 * index or its user may not run what Atrium sends. A process lets an unreachable Redis through (it
 * starts degraded), but its /readyz answers 503 until Redis answers, and the cluster waits for
 * every /readyz: let through here, the start would wait a minute and then blame a process.
 */
export async function checkRedisBeforeStart(url: string, ms: number, variable: string): Promise<void> {
  const redis = new QuietAuthRedis(url, {
    lazyConnect: false,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectTimeout: ms,
  });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  const refusal = await untilReadyOrRefused(redis, ms);
  if (refusal) refuseRedisLogin(redis, url, refusal, variable);
  if (redis.status !== 'ready')
    unreachable(redis, url, lastError?.message ?? `no answer within ${ms} ms`, variable);
  await refuseMissingDatabase(redis, url, variable);
  // Ready means it answered the ready check; PING is what /readyz asks, so it is asked here too.
  const pinged = await within(redis.ping(), ms);
  if (pinged === TIMED_OUT) unreachable(redis, url, `no answer to PING within ${ms} ms`, variable);
  // A PING the user may not run is refuseMissingPermission's to report, in its words.
  if (pinged !== undefined && !isPermissionRefusal(pinged))
    unreachable(redis, url, pinged instanceof Error ? pinged.message : String(pinged), variable);
  await refuseMissingPermission(redis, url, ms, variable);
  redis.disconnect();
}

function unreachable(redis: Redis, url: string, cause: string, variable: string): never {
  redis.disconnect();
  throw new ConfigError(
    variable,
    `a Redis server that answers, which every process needs to be ready (${cause})`,
    withoutPassword(url),
  );
}
