/**
 * In-process notification of committed changes. Caches listen to invalidate, subscriptions to
 * push, the webhook worker to wake up. Signals are sent only after the transaction commits, so a
 * listener never sees a change that was rolled back. The shared broadcast across instances (Redis)
 * is built on top of this by the surfaces that need it.
 */
export type DomainSignal =
  | { kind: 'user.changed'; userId: string }
  | { kind: 'order.changed'; orderId: string; ownerId: string }
  | { kind: 'post.changed'; postId: string }
  | { kind: 'comment.added'; commentId: string; postId: string }
  | { kind: 'event.recorded'; eventId: string; type: string };

type Kind = DomainSignal['kind'];
type SignalOf<K extends Kind> = Extract<DomainSignal, { kind: K }>;
type Listener<K extends Kind> = (signal: SignalOf<K>) => void;
type AnyListener = (signal: DomainSignal) => void;

export class DomainBus {
  private readonly listeners = new Map<Kind, Set<AnyListener>>();

  on<K extends Kind>(kind: K, listener: Listener<K>): () => void {
    let set = this.listeners.get(kind);
    if (!set) {
      set = new Set();
      this.listeners.set(kind, set);
    }
    const l = listener as unknown as AnyListener;
    set.add(l);
    return () => set.delete(l);
  }

  emit(signal: DomainSignal): void {
    const set = this.listeners.get(signal.kind);
    if (!set) return;
    for (const listener of set) {
      try {
        listener(signal);
      } catch {
        // A failing listener (a cache, a socket) must not undo or fail the change that was committed.
      }
    }
  }
}
