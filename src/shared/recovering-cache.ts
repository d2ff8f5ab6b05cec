import type { Cache } from './cache.js';
import type { SharedStateHealth } from './health.js';

/**
 * How many keys whose delete could not reach Redis one process remembers. Past it the process
 * forgets the keys and drops the whole cache instead (Cache.clear) once Redis answers: more
 * expensive for the cache, as safe for the readers. Ten thousand keys of about 40 bytes are under
 * a megabyte; an outage that sees more changed users than that in one process is a large one.
 */
export const MAX_PENDING_DELETES = 10_000;

/**
 * A shared (Redis) cache whose invalidations survive a Redis outage, as far as one process can
 * make them (decisions §3: every cached copy of a changed user is invalidated). Entries are
 * dropped after a change; a drop that cannot reach Redis would leave the entry written before the
 * change to be served, by every instance, until its TTL once Redis is back. So:
 *
 * - A delete that fails is remembered (the key; past MAX_PENDING_DELETES keys, "drop everything")
 *   and carried out as soon as Redis answers again, at once on its return and in any case before
 *   this process reads or writes the cache again: a read waits for it, and while it cannot be done
 *   the read fails like any other during the outage (the caller reads the database).
 * - When Redis answers again after this process had it and lost it, the whole cache is dropped,
 *   again before this process reads it. Another process may have changed a user meanwhile and
 *   failed to drop its entry: an instance, or an admin command that has exited, that will never
 *   replay it, or not before this instance reads. Every instance that saw the outage drops every
 *   entry written before it, so none serves one once it has Redis back, whichever comes back first.
 *
 * What is left (docs/deployment.md): a process that never lost Redis while the writer could not
 * reach it (a partition of one instance) serves the old entry until the writer's replay, or the
 * TTL if the writer exits first without reaching Redis.
 */
export class RecoveringCache implements Cache {
  /** Keys to delete, each with the sequence number of its latest failed delete. */
  private readonly pending = new Map<string, number>();
  private sequence = 0;
  /** Requests to drop every entry, and how many of them are done. */
  private clearsWanted = 0;
  private clearsDone = 0;
  private replaying: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly inner: Cache,
    private readonly health: SharedStateHealth,
    private readonly maxPending = MAX_PENDING_DELETES,
  ) {
    health.onRecovered((afterOutage) => {
      if (afterOutage) this.clearsWanted += 1;
      // Promptly, not at this process's next read: other instances read the same entries.
      if (this.owes) this.replay().catch(() => undefined);
    });
  }

  // Nothing owed is the usual case: a read then costs no extra promise step.
  async get(key: string): Promise<string | undefined> {
    if (this.owes) await this.replay();
    return this.inner.get(key);
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    if (this.owes) await this.replay();
    await this.inner.set(key, value, ttlSeconds);
  }

  /** Fails as before when Redis cannot be reached, and then remembers the key for later. */
  delete(key: string): Promise<void> {
    const attempt = this.inner.delete(key).catch((err: unknown) => {
      this.remember(key);
      throw err;
    });
    const tracked = attempt.catch(() => undefined);
    this.inFlight.add(tracked);
    void tracked.then(() => this.inFlight.delete(tracked));
    return attempt;
  }

  async clear(): Promise<void> {
    this.clearsWanted += 1;
    await this.replay();
  }

  /** Keys whose invalidation is still owed, or Infinity when the whole cache is to be dropped. */
  get owed(): number {
    return this.clearsDone < this.clearsWanted ? Infinity : this.pending.size;
  }

  /**
   * For a process about to exit (an admin command, an instance shutting down): waits for the
   * deletes in flight, then up to `waitMs` for Redis to answer and carries out what is owed.
   * Resolves with what is still owed (0 when everything was done).
   */
  async flush(waitMs: number): Promise<number> {
    await Promise.all([...this.inFlight]);
    if (!this.owes) return 0;
    const deadline = Date.now() + waitMs;
    for (;;) {
      if (this.health.up) {
        try {
          await this.replay();
          return 0;
        } catch {
          // Redis went again, or did not answer in time: wait and try again while time remains.
        }
      }
      if (Date.now() >= deadline) return this.owed;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, deadline - Date.now())));
    }
  }

  private get owes(): boolean {
    return this.pending.size > 0 || this.clearsDone < this.clearsWanted;
  }

  private remember(key: string): void {
    if (this.pending.size >= this.maxPending && !this.pending.has(key)) {
      // Too many to remember one by one: drop everything instead, which covers every key.
      this.pending.clear();
      this.clearsWanted += 1;
      return;
    }
    this.sequence += 1;
    this.pending.delete(key);
    this.pending.set(key, this.sequence);
  }

  /** Carries out what is owed; one run at a time, which every caller in the meantime waits for. */
  private replay(): Promise<void> {
    if (!this.owes) return Promise.resolve();
    this.replaying ??= this.runReplay().finally(() => {
      this.replaying = undefined;
    });
    return this.replaying;
  }

  private async runReplay(): Promise<void> {
    while (this.owes) {
      if (this.clearsDone < this.clearsWanted) {
        const wanted = this.clearsWanted;
        const upTo = this.sequence;
        await this.inner.clear();
        this.clearsDone = wanted;
        // Keys that failed before the clear began are covered by it; later ones are not.
        for (const [key, seq] of this.pending) if (seq <= upTo) this.pending.delete(key);
        continue;
      }
      const batch = [...this.pending];
      await Promise.all(batch.map(([key]) => this.inner.delete(key)));
      // A key that failed again while this ran is owed once more (its entry may be newer).
      for (const [key, seq] of batch) if (this.pending.get(key) === seq) this.pending.delete(key);
    }
  }
}
