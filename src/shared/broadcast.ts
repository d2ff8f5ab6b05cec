/**
 * Fan-out of small messages to every listener of a channel, on every instance that shares the
 * broadcast. Delivery is at most once: a listener that is not connected when a message passes
 * never sees it. GraphQL subscriptions sit on this; the core's signals feed it.
 */
export type BroadcastListener = (message: unknown) => void;

export interface Broadcast {
  /**
   * Sends `message` (JSON-serialisable) to every listener of `channel`, here and elsewhere. Rejects
   * when the shared layer could not carry it to other instances; listeners here hear it regardless.
   */
  publish(channel: string, message: unknown): Promise<void>;
  /**
   * Listens to `channel` from the moment the returned promise resolves (the shared layer has
   * confirmed it); the function it resolves to stops listening.
   */
  subscribe(channel: string, listener: BroadcastListener): Promise<() => void>;
  close(): Promise<void>;
}

/** Calls every listener; one that throws must not stop the others. */
export function deliver(listeners: Iterable<BroadcastListener> | undefined, message: unknown): void {
  if (!listeners) return;
  for (const listener of [...listeners]) {
    try {
      listener(message);
    } catch {
      // A listener's failure (a closed socket) is its own business.
    }
  }
}
