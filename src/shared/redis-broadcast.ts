import type { Redis } from 'ioredis';
import { type Broadcast, type BroadcastListener, deliver, type ResumeListener } from './broadcast.js';
import type { SharedStateHealth } from './health.js';

/**
 * How long `subscribe` waits for Redis to confirm a channel before going on without the
 * confirmation (the channel is still subscribed as soon as Redis answers). Subscribing happens at
 * start, which waits as long for a late Redis (REDIS_START_WAIT_MS in src/compose.ts); a hung Redis
 * must not hold the start for ever.
 */
export const SUBSCRIBE_WAIT_MS = 5_000;

/**
 * How often the connection that listens to the broadcast asks Redis for a PONG. A listening
 * connection sends nothing of its own, so without this it would never learn that it is dead: a path
 * that forgot it (a NAT or firewall that dropped its state, a Redis restarted behind a partition)
 * leaves it open and silent for good, and every subscription of the instance would hear nothing
 * from other instances, with no error, while everything else works again. A PING unanswered for
 * REDIS_SOCKET_TIMEOUT_MS (the connection's socketTimeout, src/shared/redis-connection.ts) drops
 * the connection, and ioredis connects and subscribes again: a dead listening connection is
 * replaced within about 7 s. One PING every 5 s per process costs nothing measurable. Each PONG
 * is also what tells this instance until when it was surely hearing (see `onResume`).
 */
export const SUBSCRIBER_PING_MS = 5_000;

/**
 * Redis pub/sub: a message published by any instance reaches the listeners of every instance,
 * this one included (local listeners hear it from Redis too, not directly, so nobody gets it
 * twice). Pub/sub itself is at most once: what passes while this instance's listening connection
 * is dead or being replaced is not kept for it.
 *
 * So the broadcast tracks until when it surely heard: the moment it sent each PING that was
 * answered (Redis answers in order, so everything it pushed before handling the PING reached this
 * instance), or a message arrived. When the listening connection closes (dropped by the PING's
 * timeout, Redis restarted or down), that moment is kept; once a new connection is ready and Redis
 * has confirmed the channels again, `onResume` listeners are told listening resumed and from
 * when messages may have been missed. The first connection counts as a resumption from the moment
 * listening was first asked for, so a process that started while Redis was away learns of that
 * gap too.
 *
 * When Redis cannot carry a message (down, or not answering), this instance's listeners hear it
 * directly, as they would from the in-process broadcast, and other instances do not hear it (their
 * user may catch it up from the store, as the comment feed does). A
 * publish that was sent but not answered in time may still reach Redis later (a server continued
 * after SIGCONT, a path that heals) and then be heard here a second time: listeners deduplicate by
 * the id their messages carry (src/shared/broadcast.ts). The broadcast used to drop such a late
 * copy itself by its exact JSON text, which any difference in serialisation defeats; the listener
 * knows what makes two messages the same.
 */
export class RedisBroadcast implements Broadcast {
  private readonly channels = new Map<string, Set<BroadcastListener>>();
  private readonly resumeListeners = new Set<ResumeListener>();
  private subscriberConnection: Redis | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** The last moment this instance knew its listening connection heard everything Redis carried. */
  private heardUntil = 0;
  /** Set while listening is interrupted: from when messages may be missing. */
  private gapSince: number | undefined;

  constructor(
    private readonly publisher: Redis,
    private readonly prefix = 'atrium:bc:',
    /** When given, publishing fails at once while Redis does not answer, and waits a bounded time. */
    private readonly health?: SharedStateHealth,
  ) {}

  /**
   * A connection in subscriber mode can do nothing else, so listening opens a second one, once. A
   * SUBSCRIBE left unanswered by a dropped connection is sent again on the next one (the commands
   * connection does not resend, src/shared/redis-connection.ts): subscribing twice is harmless.
   */
  private get subscriber(): Redis {
    if (this.subscriberConnection) return this.subscriberConnection;
    const subscriber = this.publisher.duplicate({ autoResendUnfulfilledCommands: true });
    this.subscriberConnection = subscriber;
    // Not heard anything yet: the first connection made ready ends this gap.
    this.gapSince = Date.now();
    subscriber.on('error', () => undefined);
    this.heartbeat = setInterval(() => {
      if (subscriber.status !== 'ready') return;
      const sent = Date.now();
      subscriber.ping().then(
        () => this.heard(sent),
        () => undefined,
      );
    }, SUBSCRIBER_PING_MS);
    this.heartbeat.unref();
    subscriber.on('close', () => {
      // Kept from the first close of an interruption: reconnection attempts close again and again.
      this.gapSince ??= this.heardUntil;
    });
    subscriber.on('ready', () => this.resubscribe(subscriber));
    subscriber.on('message', (channel: string, text: string) => {
      this.heard(Date.now());
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

  private heard(at: number): void {
    if (at > this.heardUntil) this.heardUntil = at;
  }

  /**
   * A connection (first or new) is ready: once Redis confirms every channel on it (ioredis has
   * already asked again for those it knew; asking twice is harmless, and the answer to this one
   * comes after theirs), listening has resumed, and the listeners are told from when they may
   * have missed messages. Should the connection drop before confirming, the next one tries again
   * and the gap runs on from the same moment.
   */
  private resubscribe(subscriber: Redis): void {
    const names = [...this.channels.keys()].map((channel) => this.prefix + channel);
    const resumed = () => {
      this.heard(Date.now());
      const since = this.gapSince;
      if (since === undefined || subscriber !== this.subscriberConnection) return;
      this.gapSince = undefined;
      for (const listener of [...this.resumeListeners]) {
        try {
          listener({ since });
        } catch {
          // One listener's failure must not keep the others from catching up.
        }
      }
    };
    if (names.length === 0) {
      // Nobody listens: nothing was missed by anyone.
      this.gapSince = undefined;
      this.heard(Date.now());
      return;
    }
    subscriber.subscribe(...names).then(resumed, () => undefined);
  }

  onResume(listener: ResumeListener): () => void {
    this.resumeListeners.add(listener);
    return () => void this.resumeListeners.delete(listener);
  }

  /** Rejects when Redis did not carry the message; this instance's listeners have it all the same. */
  async publish(channel: string, message: unknown): Promise<void> {
    const text = JSON.stringify(message);
    const send = () => this.publisher.publish(this.prefix + channel, text);
    try {
      await (this.health ? this.health.call(send) : send());
    } catch (err) {
      deliver(this.channels.get(channel), JSON.parse(text));
      throw err;
    }
  }

  async subscribe(channel: string, listener: BroadcastListener): Promise<() => void> {
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(listener);
    // SUBSCRIBE answers once Redis will deliver to us; repeating it for a known channel is harmless.
    // With Redis down the instance still starts (and serves everything else): the channel is
    // subscribed when the connection is ready (`resubscribe`), as the limiter and cache also
    // recover then. A hung Redis (connection open, nothing answers) would never confirm: wait a
    // bounded time, and not at all when Redis is already known to be down or silent.
    const subscriber = this.subscriber;
    const name = this.prefix + channel;
    const confirmed = subscriber.subscribe(name).then(
      () => undefined,
      () => undefined,
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
    this.resumeListeners.clear();
    clearInterval(this.heartbeat);
    const subscriber = this.subscriberConnection;
    this.subscriberConnection = undefined;
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }
}
