import { type Redis, ReplyError } from 'ioredis';

/** A refused `SELECT <db>`: the database index REDIS_URL names is not one this server has. */
export function isSelectRefusal(err: unknown): boolean {
  return err instanceof ReplyError && (err as { command?: { name?: string } }).command?.name === 'select';
}

/**
 * Redis refusing the login REDIS_URL gives: `WRONGPASS` (a wrong password, or an ACL user the server
 * does not have or has disabled), `NOAUTH` (no password, where the server requires one; the answer
 * to ioredis's ready check), or Redis 5's `ERR invalid password`. A setting to change, not an outage:
 * the server answered, and will answer the same until the setting or the server's users change. (A
 * password for a server that needs none is not a refusal: the connection goes on without it,
 * src/shared/redis-connection.ts.)
 */
export function isAuthRefusal(err: unknown): boolean {
  return (
    err instanceof ReplyError &&
    /^(WRONGPASS|NOAUTH)\b|^ERR invalid (username-)?password/.test((err as Error).message)
  );
}

/**
 * Redis's answer to a command its ACL user may not run, or a key or channel it may not touch
 * (`NOPERM this user has no permissions to run the 'evalsha' command`, `NOPERM this user has no
 * permissions to access one of the keys used as arguments`), and the same said of a command a Lua
 * script calls, which Redis 6 and 7.0 word as an ERR (`ERR The user executing the script can't run
 * this command or subcommand`, `... can't access at least one of the keys`). Like a refused login, a setting to change (the user's ACL rules), not an outage:
 * the server answered, and will answer the same until its rules change.
 */
export function isPermissionRefusal(err: unknown): boolean {
  return (
    err instanceof ReplyError &&
    /^NOPERM\b|The user executing the script can't\b/.test((err as Error).message)
  );
}

/**
 * Emitted by the process's Redis connection (src/shared/redis-connection.ts) when REDIS_URL gives a
 * password and Redis needs none: it answers AUTH with an error, and the connection goes on without.
 */
export const PASSWORD_NOT_NEEDED = 'atrium:password-not-needed';

interface Log {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

const silent: Log = { warn: () => undefined, info: () => undefined };

/** Thrown instead of waiting when the shared store is known to be unreachable. */
export class SharedStateUnavailable extends Error {
  constructor(message = 'shared state (Redis) is not connected') {
    super(message);
    this.name = 'SharedStateUnavailable';
  }
}

/**
 * How long one call to Redis may take before it is given up and the caller degrades (rate limits
 * fail open, caches read through). A healthy Redis answers in about a millisecond, and the slowest
 * call Atrium makes (the weighted limiter script over a full GraphQL budget) in a few; 500 ms is
 * far above that even on a loaded machine, yet short enough that a hung Redis (a stopped process,
 * a network path that swallows packets: the connection stays open and nothing answers) delays a
 * request by half a second at most instead of holding it until REQUEST_TIMEOUT_MS. A constant, not
 * a setting: nothing about a deployment makes another value right, and decisions.md fixes the
 * variables.
 */
export const REDIS_CALL_TIMEOUT_MS = 500;

/**
 * Whether the shared store (Redis) answers, and what its users did without it. Callers that
 * degrade (rate limits fail open, caches read through) report each such decision here: it is
 * counted for /metrics and logged once per outage, so an outage is one warning and one recovery
 * line rather than one line per request. The connection's own failure is likewise logged once per
 * outage, not on each of ioredis's reconnect attempts (about 30 a minute).
 *
 * Redis is "up" while its connection is ready and it answers: a call that gets no answer within
 * REDIS_CALL_TIMEOUT_MS marks it not answering, and from then on every call through `call` (or a
 * `failFast` wrapper) fails at once, without waiting, until Redis answers again: a reply to a call
 * still in flight, or the connection becoming ready after ioredis dropped the silent one and
 * reconnected (src/shared/redis-connection.ts).
 */
export class SharedStateHealth {
  private readonly failOpen = new Map<string, number>();
  private readonly warned = new Set<string>();
  /** Components whose last call Redis refused for its user's ACL rules (the connection stays up). */
  private readonly refused = new Set<string>();
  private log: Log = silent;
  private wasReady = false;
  /** The connection's failure this outage has been logged (ioredis repeats it on every reconnect attempt). */
  private connectionReported = false;
  /** Redis's refusal of the login has been logged this outage (it repeats on every reconnect attempt). */
  private authRefusalReported = false;
  /** While the start waits for Redis (untilStarted): a refusal of the login is the start's error, not a log line. */
  private starting = false;
  /** False from a call's timeout until Redis answers something again. */
  private answering = true;
  private readonly recoveryListeners: Array<(afterOutage: boolean) => void> = [];

  constructor(
    private readonly redis: Redis | undefined,
    private readonly timeoutMs = REDIS_CALL_TIMEOUT_MS,
  ) {
    redis?.on('error', (err: Error) => {
      // A database index the server lacks stops the start (refuseMissingDatabase), naming REDIS_URL
      // in one line; logged here too it would be a second line.
      if (isSelectRefusal(err)) return;
      if (isAuthRefusal(err)) return this.authRefused(err);
      if (this.connectionReported) return;
      this.connectionReported = true;
      this.log.warn({ err: err.message }, 'redis error; reconnecting (not logged again until it is back)');
    });
    // Ready: the server answered the connection's ready check, so it answers again.
    redis?.on('ready', () => this.recovered());
    // Sent again on every connection and reconnection; a setting that stays wrong is said once.
    redis?.once(PASSWORD_NOT_NEEDED, (err: Error) =>
      this.log.warn(
        { err: err.message },
        'REDIS_URL gives a password, but this Redis server requires none: connected without it',
      ),
    );
  }

  useLogger(log: Log): void {
    this.log = log;
  }

  /**
   * The start's wait for Redis (call it in the same turn as connecting): resolves when the
   * connection is ready, or after `ms` (a late or unreachable Redis only degrades), or at once with
   * Redis's refusal of the login REDIS_URL gives, which the start makes its error (one line naming
   * REDIS_URL, src/shared/redis-connection.ts), so it is not also logged as a warning meanwhile.
   * A refusal after this (a password changed on the server, met on a reconnection) is logged and
   * degrades, like an outage.
   */
  async untilStarted(ms: number): Promise<Error | undefined> {
    if (!this.redis) return undefined;
    this.starting = true;
    try {
      return await untilReadyOrRefused(this.redis, ms);
    } finally {
      this.starting = false;
    }
  }

  /**
   * Calls `listener` each time Redis answers again: when the connection becomes ready, or a reply
   * ends a silence. `afterOutage` is false for the first connection of this process and true for
   * every later one (this process had Redis and lost it, so whatever it or another process meant
   * to write meanwhile may be missing there). Called once `up` is true again, so the listener's
   * own calls through `call` go ahead.
   */
  onRecovered(listener: (afterOutage: boolean) => void): void {
    this.recoveryListeners.push(listener);
  }

  /** True when Redis is configured, its connection is ready for commands and it answers them. */
  get up(): boolean {
    return this.redis === undefined || (this.redis.status === 'ready' && this.answering);
  }

  get configured(): boolean {
    return this.redis !== undefined;
  }

  /**
   * Runs one call to Redis: at once SharedStateUnavailable while Redis is not up, otherwise the
   * call's own result, or SharedStateUnavailable after REDIS_CALL_TIMEOUT_MS without an answer
   * (which marks Redis not answering, so the calls after it do not wait too).
   */
  call<T>(run: () => Promise<T>): Promise<T> {
    if (!this.up) return Promise.reject(new SharedStateUnavailable());
    let pending: Promise<T>;
    try {
      pending = run();
    } catch (err) {
      return Promise.reject(err);
    }
    // A reply that comes after the timeout still shows Redis answers again (SIGCONT, a healed path).
    pending.then(
      () => this.answered(),
      (err: unknown) => {
        if (err instanceof Error && err.name === 'ReplyError') this.answered();
      },
    );
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        // A reply already received while the event loop was busy is read in this loop turn's poll
        // phase, before setImmediate runs: a slow machine is not taken for a silent Redis.
        setImmediate(() => {
          if (settled) return;
          settled = true;
          this.notAnswering();
          reject(new SharedStateUnavailable(`Redis did not answer within ${this.timeoutMs} ms`));
        });
      }, this.timeoutMs);
      pending.then(
        (value) => {
          clearTimeout(timer);
          if (settled) return;
          settled = true;
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          if (settled) return;
          settled = true;
          reject(err);
        },
      );
    });
  }

  /**
   * One request went ahead without a shared part (a limit not counted, a cache not used); `what`
   * says what was given up. Every such request is counted. With Redis it is an outage, logged once
   * until Redis is back. Without Redis the part lives in this process and has no outage to wait
   * out, so its failure is a fault, logged each time, on `log` (the request's logger) when given.
   * The callers only report; this decides how it is counted and logged.
   */
  degraded(component: string, what: string, err: unknown, log?: Log): void {
    this.failOpen.set(component, (this.failOpen.get(component) ?? 0) + 1);
    const fields = { component, err: err instanceof Error ? err.message : String(err) };
    if (!this.configured) {
      (log ?? this.log).warn(fields, `${component} failed: ${what}`);
      return;
    }
    if (this.warned.has(component)) return;
    this.warned.add(component);
    // Redis answered, refusing: its user's ACL rules changed under a running process. Said as what
    // it is, so nobody waits for an outage to end; it lasts until the rules change back.
    if (isPermissionRefusal(err)) {
      this.refused.add(component);
      this.log.warn(
        fields,
        `Redis denied permission: the user in REDIS_URL may not run a command Atrium needs (its ACL rules); ${what}`,
      );
      return;
    }
    this.log.warn(fields, `Redis unavailable: ${what}`);
  }

  /**
   * A call of `component` went through. After a permission refusal this is how its end shows: the
   * connection never dropped, so no reconnection says Redis is back. Logged once, and the component
   * is watched again for the next refusal. (Costs a size check otherwise: it runs on every request.)
   */
  served(component: string): void {
    if (this.refused.size === 0 || !this.refused.delete(component)) return;
    this.warned.delete(component);
    this.log.warn(
      { component },
      `Redis permits ${component} again: the user in REDIS_URL may run the commands it needs`,
    );
  }

  /** Requests that went ahead without the shared store, by component, since the process started. */
  degradedCounts(): ReadonlyMap<string, number> {
    return this.failOpen;
  }

  /**
   * Redis refused the login on a connection or reconnection (ioredis tries again, with the same
   * credentials, about every 2 s). Once per outage, even after a connection failure was logged: a
   * Redis that was down and is back refusing the login is a new reason, and the one to act on.
   */
  private authRefused(err: Error): void {
    if (this.starting || this.authRefusalReported) return;
    this.authRefusalReported = true;
    this.connectionReported = true;
    this.log.warn(
      { err: err.message },
      'Redis refused authentication: the user or password in REDIS_URL is not accepted; ' +
        'reconnecting, degraded until it is (not logged again until it is back)',
    );
  }

  private notAnswering(): void {
    if (!this.answering) return;
    this.answering = false;
    if (this.connectionReported) return;
    this.connectionReported = true;
    this.log.warn(
      { timeout_ms: this.timeoutMs },
      'Redis does not answer; calls to it fail at once until it does (not logged again until it is back)',
    );
  }

  /** Redis answered: after a timeout, this ends the outage (the connection's own ready event does too). */
  private answered(): void {
    if (!this.answering && this.redis?.status === 'ready') this.recovered();
  }

  private recovered(): void {
    const afterOutage = this.wasReady;
    this.answering = true;
    // Every outage line gets its back line: the connection's own (logged whether or not a request
    // met the outage, so an outage no request met is closed too), or a request's degrading.
    const logged = this.connectionReported || (this.wasReady && this.warned.size > 0);
    this.connectionReported = false;
    this.authRefusalReported = false;
    if (logged) {
      // Warn, like the outage line, so a filter that shows one shows the other.
      this.log.warn({ components: [...this.warned] }, 'Redis is back: shared limits and caches restored');
    }
    this.wasReady = true;
    this.warned.clear();
    this.refused.clear();
    for (const listener of this.recoveryListeners) listener(afterOutage);
  }
}

/**
 * Wraps a Redis-backed implementation so that each of its calls goes through `health.call`: while
 * the connection is down or Redis does not answer, every call fails at once instead of queueing
 * behind reconnection attempts or a silent connection (which would hold requests for seconds), and
 * no call waits longer than REDIS_CALL_TIMEOUT_MS.
 */
export function failFast<T extends object>(health: SharedStateHealth, impl: T): T {
  return new Proxy(impl, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        health.call(() => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
    },
  });
}

/**
 * Resolves when the connection is ready; with Redis's refusal of the login (isAuthRefusal) as
 * soon as one comes; and with nothing after `ms`, or once the connection has ended for good (a
 * connection made without reconnection that could not connect): neither of those says anything
 * about the login.
 */
export function untilReadyOrRefused(redis: Redis, ms: number): Promise<Error | undefined> {
  if (redis.status === 'ready') return Promise.resolve(undefined);
  if (redis.status === 'end') return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const done = (refusal?: Error) => {
      clearTimeout(timer);
      redis.off('ready', ready);
      redis.off('end', ready);
      redis.off('error', error);
      resolve(refusal);
    };
    const ready = () => done();
    const error = (err: Error) => {
      if (isAuthRefusal(err)) done(err);
    };
    const timer = setTimeout(ready, ms);
    redis.once('ready', ready);
    redis.once('end', ready);
    redis.on('error', error);
  });
}
