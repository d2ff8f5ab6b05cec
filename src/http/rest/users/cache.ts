import type { Logger } from 'pino';
import type { DomainBus } from '../../../events/bus.js';
import type { Cache } from '../../../shared/cache.js';
import type { SharedStateHealth } from '../../../shared/health.js';

/** Event-driven invalidation is what keeps entries fresh; the TTL only bounds a missed one. */
export const USER_CACHE_TTL_SECONDS = 60;

/** Versioned so instances running a different REST shape never read each other's entries. */
export const userCacheKey = (userId: string): string => `rest-user:v2:${userId}`;

const warn = (logger: Logger, what: string) => (err: unknown) =>
  logger.warn({ err: err instanceof Error ? err.message : String(err) }, what);

/**
 * Drops the cached REST copy of a user; a cache outage is logged, never an error of the change.
 * With Redis, a drop that cannot reach it is carried out once it answers again
 * (src/shared/recovering-cache.ts).
 */
export function dropCachedUser(cache: Cache, userId: string, logger: Logger): Promise<void> {
  return cache
    .delete(userCacheKey(userId))
    .catch(warn(logger, 'could not invalidate a cached user now; done when the cache answers again'));
}

/**
 * Drops the cached REST copy whenever a user changes, whatever surface changed it (REST, GraphQL,
 * gRPC, CLI). Installed by the composition root for every process role, so a gRPC-only process
 * sharing Redis also clears the copy the REST instances serve.
 */
export function invalidateUsersOnChange(bus: DomainBus, cache: Cache, logger: Logger): () => void {
  return bus.on('user.changed', ({ userId }) => {
    void dropCachedUser(cache, userId, logger);
  });
}

interface Read {
  stale: boolean;
}

/** How the REST user API reads a user's JSON, and forgets it after a change it made itself. */
export interface UserReads {
  read(userId: string, load: () => Promise<string>): Promise<{ json: string; hit: boolean }>;
  invalidate(userId: string): Promise<void>;
}

/** Every read goes to the store, so it is as fresh as the database (`X-Cache: MISS` always). */
const UNCACHED: UserReads = {
  read: async (_userId, load) => ({ json: await load(), hit: false }),
  invalidate: async () => undefined,
};

/**
 * Whether REST user reads may be answered from a cache (decisions §3: a change from any surface or
 * process invalidates every cached copy at once).
 *
 * - With Redis the cache is shared, and every writer, in whatever process, drops the copy there;
 *   after a Redis outage, before it is read again (src/shared/recovering-cache.ts).
 * - Without it the cache is this process's memory, which another process (an admin command, a
 *   second instance) cannot reach. SQLite tells this process of their commits for free
 *   (`foreignCommits`), so the cache stays. PostgreSQL tells nothing short of a round trip to the
 *   server, which costs about what the cached read saves (one primary-key lookup), and a
 *   LISTEN/NOTIFY invalidation would arrive after the commit, not with it, and miss writes that do
 *   not send it (psql); so there every read goes to the store.
 */
export function restUserReads(deps: {
  cache: Cache;
  bus: DomainBus;
  logger: Logger;
  sharedCache: boolean;
  foreignCommits: (() => number) | undefined;
  /** Where a read that went to the database because the cache did not answer is reported. */
  health: SharedStateHealth;
}): UserReads {
  if (deps.sharedCache) return new CachedUsers(deps.cache, deps.bus, deps.logger, deps.health);
  if (deps.foreignCommits)
    return new CachedUsers(deps.cache, deps.bus, deps.logger, deps.health, deps.foreignCommits);
  return UNCACHED;
}

/**
 * Read-through access to the cached REST user. A change that commits while a miss is being loaded
 * marks that load stale so its (possibly old) result is not written back over the invalidation.
 */
export class CachedUsers implements UserReads {
  private readonly loading = new Map<string, Set<Read>>();

  /**
   * `foreignCommits` is the store's count of commits by other connections. An admin command run
   * beside an SQLite server (atrium users delete) has no bus to this process, so each entry carries
   * the count it was loaded under, and an entry from before another writer's commit is a miss.
   */
  constructor(
    private readonly cache: Cache,
    bus: DomainBus,
    private readonly logger: Logger,
    private readonly health: SharedStateHealth,
    private readonly foreignCommits: () => number = () => 0,
  ) {
    bus.on('user.changed', ({ userId }) => this.markStale(userId));
  }

  /** The cached JSON of a user, or `load()`'s result stored for next time. */
  async read(userId: string, load: () => Promise<string>): Promise<{ json: string; hit: boolean }> {
    const key = userCacheKey(userId);
    const version = `${this.foreignCommits()} `;
    try {
      const cached = await this.cache.get(key);
      if (cached?.startsWith(version)) {
        this.health.served('user_cache');
        return { json: cached.slice(version.length), hit: true };
      }
    } catch (err) {
      // A cache outage degrades to reading the database, never to an error.
      this.unavailable(err);
    }
    const read: Read = { stale: false };
    let reads = this.loading.get(userId);
    if (!reads) this.loading.set(userId, (reads = new Set()));
    reads.add(read);
    try {
      const json = await load();
      if (!read.stale) {
        await this.cache.set(key, version + json, USER_CACHE_TTL_SECONDS).then(
          // A hit or a stored copy: the cache works as a whole again (a GET alone may be allowed).
          () => this.health.served('user_cache'),
          (err: unknown) => this.unavailable(err),
        );
      }
      return { json, hit: false };
    } finally {
      reads.delete(read);
      if (reads.size === 0) this.loading.delete(userId);
    }
  }

  /** Drops the cached copy now, for a change this process has just made. */
  async invalidate(userId: string): Promise<void> {
    this.markStale(userId);
    await dropCachedUser(this.cache, userId, this.logger);
  }

  private unavailable(err: unknown): void {
    this.health.degraded('user_cache', 'user reads go to the database (not cached)', err);
  }

  private markStale(userId: string): void {
    for (const read of this.loading.get(userId) ?? []) read.stale = true;
  }
}
