import type { RateDecision, SlidingWindowLimiter } from './rate-limiter.js';
import { checkCost, toDecision, windowMs } from './window.js';

interface Log {
  /** Request times in ms, ascending; entries before `head` have already left the window. */
  times: number[];
  head: number;
  windowMs: number;
}

/** Expired logs are swept after this many operations, so idle keys do not pile up forever. */
const SWEEP_EVERY = 10_000;

/** The exact sliding log for one process: every counted request is remembered for the window. */
export class MemorySlidingWindowLimiter implements SlidingWindowLimiter {
  private readonly logs = new Map<string, Log>();
  private operations = 0;

  constructor(private readonly nowMs: () => number = Date.now) {}

  async hit(key: string, limit: number, windowSeconds: number, cost = 1): Promise<RateDecision> {
    return this.decide(key, limit, windowSeconds, checkCost(cost), true);
  }

  async peek(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    return this.decide(key, limit, windowSeconds, 1, false);
  }

  async reset(key: string): Promise<void> {
    this.logs.delete(key);
  }

  private decide(
    key: string,
    limit: number,
    windowSeconds: number,
    cost: number,
    count: boolean,
  ): RateDecision {
    const span = windowMs(limit, windowSeconds);
    if (++this.operations % SWEEP_EVERY === 0) this.sweep();
    let log = this.logs.get(key);
    // The wall clock may step back; times stay ascending so pruning from the front stays exact.
    const last = log && log.times.length > log.head ? log.times[log.times.length - 1]! : -Infinity;
    const now = Math.max(this.nowMs(), last);
    if (log) prune(log, now - span);
    const inWindow = log ? log.times.length - log.head : 0;
    const allowed = inWindow + cost <= limit;
    if (allowed && count) {
      if (!log) this.logs.set(key, (log = { times: [], head: 0, windowMs: span }));
      log.windowMs = span;
      // A request of `cost` points is `cost` entries of the same time: pruning stays exact.
      for (let i = 0; i < cost; i++) log.times.push(now);
    }
    const oldest = log && log.times.length > log.head ? log.times[log.head]! : now;
    return toDecision({
      allowed,
      limit,
      counted: allowed ? inWindow + cost : inWindow,
      oldestMs: oldest,
      nowMs: now,
      windowMs: span,
    });
  }

  private sweep(): void {
    const now = this.nowMs();
    for (const [key, log] of this.logs) {
      prune(log, now - log.windowMs);
      if (log.times.length === log.head) this.logs.delete(key);
    }
  }
}

/** Drops requests made at or before `cutoff`: a request counts for exactly the window after it. */
function prune(log: Log, cutoff: number): void {
  while (log.head < log.times.length && log.times[log.head]! <= cutoff) log.head++;
  if (log.head > 1024 && log.head * 2 > log.times.length) {
    log.times = log.times.slice(log.head);
    log.head = 0;
  }
}
