/** A string cache with per-entry expiry: an in-process LRU, or Redis so instances share it. */
export interface Cache {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Drops every entry (in Redis: every key under this cache's prefix, and only those). */
  clear(): Promise<void>;
}
