import { type Broadcast, type BroadcastListener, deliver, type ResumeListener } from './broadcast.js';

/** One process: messages reach only listeners of this instance (the single-process default). */
export class MemoryBroadcast implements Broadcast {
  private readonly channels = new Map<string, Set<BroadcastListener>>();

  async publish(channel: string, message: unknown): Promise<void> {
    // Round-tripped through JSON so listeners get what they would get from Redis, never a shared object.
    const copy: unknown = JSON.parse(JSON.stringify(message));
    queueMicrotask(() => deliver(this.channels.get(channel), copy));
  }

  async subscribe(channel: string, listener: BroadcastListener): Promise<() => void> {
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.channels.get(channel) === set) this.channels.delete(channel);
    };
  }

  /** Nothing between publisher and listener to lose: never a gap. */
  onResume(_listener: ResumeListener): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    this.channels.clear();
  }
}
