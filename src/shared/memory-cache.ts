import { LRUCache } from 'lru-cache';
import type { Cache } from './cache.js';

/** A bounded in-process cache: least recently used entries go first, each expires on its own TTL. */
export class MemoryCache implements Cache {
  private readonly entries: LRUCache<string, string>;

  constructor(maxEntries = 10_000) {
    this.entries = new LRUCache<string, string>({ max: maxEntries, ttlAutopurge: false });
  }

  async get(key: string): Promise<string | undefined> {
    return this.entries.get(key);
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    this.entries.set(key, value, { ttl: ttlMs(ttlSeconds) });
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async clear(): Promise<void> {
    this.entries.clear();
  }
}

export function ttlMs(ttlSeconds: number): number {
  if (!Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
    throw new RangeError(`cache TTL must be a positive number of seconds, got ${ttlSeconds}`);
  }
  return Math.max(1, Math.round(ttlSeconds * 1000));
}
