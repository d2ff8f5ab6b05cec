/**
 * Fan-out of small messages to every listener of a channel, on every instance that shares the
 * broadcast. Delivery itself is at most once: a listener that is not connected when a message
 * passes never sees it. What the broadcast does know is *when* it may have missed messages: after
 * listening was interrupted (the shared layer's connection lost or replaced), it says so once
 * listening has resumed (`onResume`), with the moment from which messages may be missing, so a
 * user whose messages stand for stored records can read what it missed from the store. GraphQL
 * subscriptions sit on this; the core's signals feed it.
 *
 * A message whose `publish` rejected was heard here directly and may still reach the shared layer
 * late (it was sent, and not answered in time), and then be heard a second time: messages that
 * must be heard once carry an id their listeners deduplicate on.
 */
export type BroadcastListener = (message: unknown) => void;

/**
 * Listening resumed after an interruption: messages of every channel published from about `since`
 * (epoch milliseconds: the last moment this instance knew it was hearing, not widened by any
 * margin) until now may not have been heard here. Messages published from now on are.
 */
export interface BroadcastGap {
  since: number;
}

export type ResumeListener = (gap: BroadcastGap) => void;

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
  /**
   * Calls `listener` each time listening to the shared layer resumes after an interruption (the
   * in-process broadcast is never interrupted, and never calls it); the function returned stops.
   */
  onResume(listener: ResumeListener): () => void;
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
