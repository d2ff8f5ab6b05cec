import type { Redis } from 'ioredis';

interface Log {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

const silent: Log = { warn: () => undefined, info: () => undefined };

/** Thrown instead of waiting when the shared store is known to be unreachable. */
export class SharedStateUnavailable extends Error {
  constructor() {
    super('shared state (Redis) is not connected');
    this.name = 'SharedStateUnavailable';
  }
}

/**
 * Whether the shared store (Redis) answers, and what its users did without it. Callers that
 * degrade (rate limits fail open, caches read through) report each such decision here: it is
 * counted for /metrics and logged once per outage, so an outage is one warning and one recovery
 * line rather than one line per request. The connection's own failure is likewise logged once per
 * outage, not on each of ioredis's reconnect attempts (about 30 a minute).
 */
export class SharedStateHealth {
  private readonly failOpen = new Map<string, number>();
  private readonly warned = new Set<string>();
  private log: Log = silent;
  private wasReady = false;
  /** The connection's failure this outage has been logged (ioredis repeats it on every reconnect attempt). */
  private connectionReported = false;

  constructor(private readonly redis: Redis | undefined) {
    redis?.on('error', (err: Error) => {
      if (this.connectionReported) return;
      this.connectionReported = true;
      this.log.warn({ err: err.message }, 'redis error; reconnecting (not logged again until it is back)');
    });
    redis?.on('ready', () => {
      this.connectionReported = false;
      if (this.wasReady && this.warned.size > 0) {
        // Warn, like the outage line, so a filter that shows one shows the other.
        this.log.warn({ components: [...this.warned] }, 'Redis is back: shared limits and caches restored');
      }
      this.wasReady = true;
      this.warned.clear();
    });
  }

  useLogger(log: Log): void {
    this.log = log;
  }

  /** True when Redis is configured and its connection is ready for commands. */
  get up(): boolean {
    return this.redis === undefined || this.redis.status === 'ready';
  }

  get configured(): boolean {
    return this.redis !== undefined;
  }

  /** One request went ahead without the shared store; `what` says what was given up. */
  degraded(component: string, what: string, err: unknown): void {
    this.failOpen.set(component, (this.failOpen.get(component) ?? 0) + 1);
    if (this.warned.has(component)) return;
    this.warned.add(component);
    this.log.warn(
      { component, err: err instanceof Error ? err.message : String(err) },
      `Redis unavailable: ${what}`,
    );
  }

  /** Requests that went ahead without the shared store, by component, since the process started. */
  degradedCounts(): ReadonlyMap<string, number> {
    return this.failOpen;
  }
}

/**
 * Wraps a Redis-backed implementation so that, while the connection is down, every call fails at
 * once instead of queueing behind reconnection attempts (which would hold requests for seconds).
 */
export function failFast<T extends object>(redis: Redis, impl: T): T {
  return new Proxy(impl, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (redis.status !== 'ready') return Promise.reject(new SharedStateUnavailable());
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** Resolves when the connection is ready, or after `ms` regardless: a late Redis only degrades. */
export function untilReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    redis.once('ready', done);
  });
}
