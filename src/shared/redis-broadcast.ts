import type { Redis } from 'ioredis';
import { type Broadcast, type BroadcastListener, deliver } from './broadcast.js';
import type { SharedStateHealth } from './health.js';

/**
 * How long `subscribe` waits for Redis to confirm a channel before going on without the
 * confirmation (the channel is still subscribed as soon as Redis answers). Subscribing happens at
 * start, which waits as long for a late Redis (REDIS_START_WAIT_MS in src/compose.ts); a hung Redis
 * must not hold the start for ever.
 */
export const SUBSCRIBE_WAIT_MS = 5_000;

/**
 * Redis pub/sub: a message published by any instance reaches the listeners of every instance,
 * this one included (local listeners hear it from Redis too, never directly, so nobody gets it
 * twice). Pub/sub is at most once, which is what the spec promises for shared delivery.
 */
export class RedisBroadcast implements Broadcast {
  private readonly channels = new Map<string, Set<BroadcastListener>>();
  private subscriberConnection: Redis | undefined;

  constructor(
    private readonly publisher: Redis,
    private readonly prefix = 'atrium:bc:',
    /** When given, publishing fails at once while Redis does not answer, and waits a bounded time. */
    private readonly health?: SharedStateHealth,
  ) {}

  /** A connection in subscriber mode can do nothing else, so listening opens a second one, once. */
  private get subscriber(): Redis {
    if (this.subscriberConnection) return this.subscriberConnection;
    const subscriber = this.publisher.duplicate();
    this.subscriberConnection = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', (channel: string, text: string) => {
      if (!channel.startsWith(this.prefix)) return;
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        return;
      }
      deliver(this.channels.get(channel.slice(this.prefix.length)), message);
    });
    return subscriber;
  }

  async publish(channel: string, message: unknown): Promise<void> {
    const send = () => this.publisher.publish(this.prefix + channel, JSON.stringify(message));
    await (this.health ? this.health.call(send) : send());
  }

  async subscribe(channel: string, listener: BroadcastListener): Promise<() => void> {
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(listener);
    // SUBSCRIBE answers once Redis will deliver to us; repeating it for a known channel is harmless.
    // With Redis down the instance still starts (and serves everything else): the channel is
    // subscribed when the connection is back, as the limiter and cache also recover then.
    // A hung Redis (connection open, nothing answers) would never confirm: wait a bounded time,
    // and not at all when Redis is already known to be down or silent.
    const subscriber = this.subscriber;
    const name = this.prefix + channel;
    const confirmed = subscriber.subscribe(name).then(
      () => undefined,
      () => {
        subscriber.once('ready', () => void subscriber.subscribe(name).catch(() => undefined));
      },
    );
    if (!this.health || this.health.up) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        confirmed,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, SUBSCRIBE_WAIT_MS))),
      ]);
      clearTimeout(timer);
    }
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.channels.get(channel) === set) {
        this.channels.delete(channel);
        void this.subscriber.unsubscribe(this.prefix + channel).catch(() => undefined);
      }
    };
  }

  async close(): Promise<void> {
    this.channels.clear();
    const subscriber = this.subscriberConnection;
    this.subscriberConnection = undefined;
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }
}
