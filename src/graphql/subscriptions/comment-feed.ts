import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import type { Principal } from '../../auth/principal.js';
import type { Services } from '../../compose.js';
import type { Comment } from '../../domain/comments.js';
import { idTime } from '../../domain/ids.js';
import { isStoreUnavailable } from '../../store/errors.js';

/** What travels between instances: ids only; each instance reads the rest from the store. */
interface CommentAdded {
  commentId: string;
  postId: string;
}

const CHANNEL = 'comment.added';

const isCommentAdded = (m: unknown): m is CommentAdded =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as CommentAdded).commentId === 'string' &&
  typeof (m as CommentAdded).postId === 'string';

/**
 * Sent by an instance that could not publish some comment signals (its path to Redis was down or
 * hung) once it can publish again: every other instance catches up from `missedSince` as after a
 * gap of its own. `from` names the sender, which has those comments delivered already.
 */
interface CommentsMissed {
  missedSince: number;
  from: string;
}

const isCommentsMissed = (m: unknown): m is CommentsMissed =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as CommentsMissed).missedSince === 'number' &&
  typeof (m as CommentsMissed).from === 'string';

/** One subscription's inbox, and when it began (epoch ms, this instance's clock). */
interface Waiter {
  readonly since: number;
  push(message: CommentAdded): void;
}

/** The subscriptions of one post on this instance, and the comments already handed to them. */
interface PostWatch {
  readonly waiters: Set<Waiter>;
  /** Ids handed to this post's subscriptions, oldest first, at most RECENT_IDS_PER_POST. */
  readonly recent: Set<string>;
  /** The greatest id forgotten from `recent`: catch-up hands out no id up to it (it may have gone). */
  forgottenUpTo: string;
}

/**
 * How many comment ids handed out are remembered per post that has subscribers here, so that a
 * comment heard twice (live and through catch-up, or a late copy of a publish Redis did not
 * answer in time) reaches each subscriber once. A catch-up reaches at most CATCH_UP_MAX_COMMENTS
 * back; past the memory it hands out nothing older than what was forgotten, so it never repeats.
 */
export const RECENT_IDS_PER_POST = 1_000;

/**
 * How much earlier than the broadcast's gap a catch-up starts: a comment's id and time are
 * stamped before its transaction commits and its signal is published only after, and instances'
 * clocks differ a little; a signal published just before the gap may stand for a comment stamped
 * seconds before. What this re-reads that was heard already is dropped by id.
 */
export const CATCH_UP_MARGIN_MS = 10_000;

/**
 * How far back a catch-up reaches at most: an interruption longer than this (a Redis outage of
 * an hour) is caught up for its last 15 minutes only, a bound on the work one reconnection costs.
 */
export const CATCH_UP_REACH_MS = 15 * 60_000;

/** At most this many comments (the newest) are caught up at once, over all posts. */
export const CATCH_UP_MAX_COMMENTS = 1_000;

/**
 * A catch-up the database could not answer is tried again after this, from the same moment; an
 * instance that could not publish comment signals tries this often to tell the others.
 */
const CATCH_UP_RETRY_MS = 2_000;

/**
 * An event this stream cannot deliver, answered with `error` in its place: the resolver throws it,
 * and the pipeline's masking decides what the subscriber is told (SERVICE_UNAVAILABLE for a database
 * that cannot be reached, as for any resolver). The stream stays open for the events after it.
 */
export class Undeliverable {
  constructor(readonly error: unknown) {}
}

/** The last item of a stream whose caller's credentials stopped holding: the error to answer with. */
export class CredentialsEnded extends Undeliverable {}

/**
 * The credential check failed because the database could not be reached, not because the
 * credentials were refused: the pipeline answers that SERVICE_UNAVAILABLE (`authenticationError`),
 * which is worth retrying, so the stream stays open.
 */
const checkUnavailable = (err: unknown): boolean =>
  err instanceof GraphQLError && err.extensions.code === 'SERVICE_UNAVAILABLE';

/**
 * `commentAdded` for this instance: the core's after-commit `comment.added` signal is published on
 * the shared broadcast (Redis across instances, or this process), and every message heard is handed
 * to the local subscribers of that post. One broadcast subscription per instance, not per client.
 *
 * The broadcast is at most once, but comments are stored: when it says its listening was
 * interrupted and has resumed (`onResume`: the Redis connection that listens was dead, replaced,
 * or Redis was away), the feed reads through the core which comments were added, from a little
 * before the gap until now, to the posts subscribed here, and hands out those not handed out
 * already, oldest first, to the subscriptions that began before each was added. Every comment,
 * live or caught up, goes through the same delivery (credentials checked again, read as the
 * subscriber), and each post remembers the ids it handed out, so none reaches a subscriber twice.
 * An instance that could not publish some signals (its own path to Redis failed while the others'
 * did not) tells the others from when, once it can, and they catch up the same way.
 *
 * Limits: a catch-up reaches CATCH_UP_REACH_MS back at most; and a subscriber whose own connection
 * to this instance dropped is a new subscription when it comes back (graphql-ws and graphql-sse
 * have no resume), which gets what is added from then on only.
 */
export class CommentFeed {
  private readonly byPost = new Map<string, PostWatch>();
  private readonly streams = new Set<AsyncGenerator<Comment | Undeliverable>>();
  private stopListening: (() => void) | undefined;
  private stopBridge: (() => void) | undefined;
  private stopResume: (() => void) | undefined;
  /** From when comments still have to be caught up (a gap not read yet, or whose read failed). */
  private catchUpSince: number | undefined;
  private catchingUp = false;
  private catchUpFailing = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  /** This instance, in the CommentsMissed it sends. */
  private readonly instance = randomUUID();
  /** The time of the first comment whose signal could not be published and is not announced yet. */
  private unsentSince: number | undefined;
  /** Counts publishes that failed, so an announcement made meanwhile does not clear a newer one. */
  private unsentCount = 0;
  private announceTimer: NodeJS.Timeout | undefined;

  constructor(private readonly services: Services) {}

  async start(): Promise<void> {
    const { bus, broadcast, sharedHealth } = this.services;
    // Before subscribing: the first resumption may come while the subscription is confirmed.
    this.stopResume = broadcast.onResume(({ since }) => this.missed(since));
    this.stopListening = await broadcast.subscribe(CHANNEL, (m) => {
      if (isCommentAdded(m)) this.handOut({ commentId: m.commentId, postId: m.postId });
      else if (isCommentsMissed(m) && m.from !== this.instance) this.missed(m.missedSince);
    });
    this.stopBridge = bus.on('comment.added', (signal) => {
      const message: CommentAdded = { commentId: signal.commentId, postId: signal.postId };
      broadcast.publish(CHANNEL, message).then(
        () => sharedHealth.served('broadcast'),
        (err: Error) => {
          // Not sent again: this instance's subscribers have it all the same, and the other
          // instances read it from the store once this one can tell them (`announceUnsent`).
          // Counted and logged once per Redis outage, as the other shared parts are, not once per
          // comment.
          this.unsent(idTime(signal.commentId));
          sharedHealth.degraded(
            'broadcast',
            'comment events reach only the GraphQL subscribers of this instance',
            err,
          );
        },
      );
    });
  }

  /** Comments from `since` on may not have been heard here: catch them up. */
  private missed(since: number): void {
    this.catchUpSince = Math.min(this.catchUpSince ?? since, since);
    void this.catchUp();
  }

  /** A comment added at `at` could not be published: the others are told once it can be. */
  private unsent(at: number): void {
    this.unsentSince = Math.min(this.unsentSince ?? at, at);
    this.unsentCount++;
    this.scheduleAnnouncement();
  }

  private scheduleAnnouncement(): void {
    if (this.announceTimer || this.closed) return;
    this.announceTimer = setTimeout(() => {
      this.announceTimer = undefined;
      void this.announceUnsent();
    }, CATCH_UP_RETRY_MS);
    this.announceTimer.unref();
  }

  /**
   * Tells every other instance, through the broadcast, from when they missed comments of this one
   * (a CommentsMissed message), tried every CATCH_UP_RETRY_MS until the broadcast carries it. A
   * Redis that was down for everyone made every instance's listening connection resume, so they
   * catch up anyway; this is for an instance whose own path to Redis failed while the others'
   * did not, which they could not know otherwise.
   */
  private async announceUnsent(): Promise<void> {
    const since = this.unsentSince;
    if (since === undefined || this.closed) return;
    const count = this.unsentCount;
    const message: CommentsMissed = { missedSince: since, from: this.instance };
    try {
      await this.services.broadcast.publish(CHANNEL, message);
    } catch {
      this.scheduleAnnouncement();
      return;
    }
    if (this.unsentCount === count) this.unsentSince = undefined;
    else this.scheduleAnnouncement();
  }

  /**
   * Hands a comment to the subscriptions of its post here, unless it was handed out already. A
   * caught-up one (`addedAt` given) goes only to subscriptions that began by the time it was added,
   * as it would have live, and never when it may have been forgotten from the post's memory.
   */
  private handOut(message: CommentAdded, addedAt?: number): void {
    const watch = this.byPost.get(message.postId);
    if (!watch || watch.recent.has(message.commentId)) return;
    if (addedAt !== undefined && message.commentId <= watch.forgottenUpTo) return;
    watch.recent.add(message.commentId);
    if (watch.recent.size > RECENT_IDS_PER_POST) {
      const oldest = watch.recent.values().next().value!;
      watch.recent.delete(oldest);
      if (oldest > watch.forgottenUpTo) watch.forgottenUpTo = oldest;
    }
    for (const waiter of [...watch.waiters]) {
      if (addedAt === undefined || addedAt >= waiter.since) waiter.push(message);
    }
  }

  /**
   * Reads, through the core, the comments added to the posts subscribed here since the gap the
   * broadcast reported (less CATCH_UP_MARGIN_MS, at most CATCH_UP_REACH_MS back), and hands them
   * out in order. One read at a time; gaps reported meanwhile are merged into the next. A read the
   * database cannot answer is tried again every CATCH_UP_RETRY_MS, logged once until one succeeds.
   */
  private async catchUp(): Promise<void> {
    if (this.catchingUp || this.closed) return;
    this.catchingUp = true;
    clearTimeout(this.retry);
    const { core, logger } = this.services;
    try {
      while (this.catchUpSince !== undefined && !this.closed) {
        const since = this.catchUpSince;
        this.catchUpSince = undefined;
        const postIds = [...this.byPost.keys()];
        if (postIds.length === 0) continue;
        const from = Math.max(since - CATCH_UP_MARGIN_MS, Date.now() - CATCH_UP_REACH_MS);
        let found: Awaited<ReturnType<typeof core.comments.addedSince>>;
        try {
          found = await core.comments.addedSince(postIds, from, CATCH_UP_MAX_COMMENTS);
        } catch (err) {
          this.catchUpSince = Math.min(this.catchUpSince ?? since, since);
          if (!this.catchUpFailing) {
            this.catchUpFailing = true;
            logger.warn(
              { err: (err as Error).message },
              'commentAdded catch-up failed; trying again until the database answers',
            );
          }
          this.retry = setTimeout(() => void this.catchUp(), CATCH_UP_RETRY_MS);
          this.retry.unref();
          return;
        }
        if (this.catchUpFailing) {
          this.catchUpFailing = false;
          logger.info('commentAdded catch-up done');
        }
        if (found.length >= CATCH_UP_MAX_COMMENTS) {
          logger.warn(
            { since: new Date(from).toISOString(), handedOut: found.length },
            'commentAdded catch-up hands out only the newest comments of the gap',
          );
        }
        logger.debug({ since: new Date(from).toISOString(), found: found.length }, 'commentAdded catch-up');
        for (const ref of found) {
          this.handOut({ commentId: ref.commentId, postId: ref.postId }, Date.parse(ref.createdAt));
        }
      }
    } finally {
      this.catchingUp = false;
    }
  }

  /**
   * Comments added to `postId` from now on that `viewer` may see. Each one is read through the core
   * as the subscriber when it arrives, so a draft's comments reach only its author and admins, and
   * a post published later starts delivering.
   *
   * `recheck` authenticates the subscriber's credentials again before each delivery: a key revoked
   * or a user deleted since the subscription began (by any process) ends the stream with that error
   * instead of the comment, and the comment is read as the subscriber is now, so an admin demoted
   * since stops receiving the comments of a draft they no longer may see. An event met by a database that cannot be reached (the check, or the
   * read of the comment) is answered with that error instead, and the stream stays open: the next
   * event once the database answers is delivered (docs/graphql.md, Subscriptions).
   */
  subscribe(
    postId: string,
    viewer: Principal | null,
    recheck?: () => Promise<Principal | null>,
  ): AsyncGenerator<Comment | Undeliverable> {
    const { core, logger } = this.services;
    const pending: CommentAdded[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    const waiter: Waiter = {
      since: Date.now(),
      push: (m) => {
        pending.push(m);
        wake?.();
      },
    };
    let watch = this.byPost.get(postId);
    if (!watch) {
      watch = { waiters: new Set(), recent: new Set(), forgottenUpTo: '' };
      this.byPost.set(postId, watch);
    }
    const watched = watch;
    watched.waiters.add(waiter);
    const detach = () => {
      done = true;
      watched.waiters.delete(waiter);
      if (watched.waiters.size === 0 && this.byPost.get(postId) === watched) this.byPost.delete(postId);
      wake?.();
    };
    const streams = this.streams;
    async function* comments(): AsyncGenerator<Comment | Undeliverable> {
      try {
        while (!done) {
          const next = pending.shift();
          if (!next) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
            continue;
          }
          let reader = viewer;
          if (recheck) {
            try {
              reader = await recheck();
            } catch (err) {
              // The database away: this event is answered with the error, the next may be delivered.
              if (checkUnavailable(err)) {
                yield new Undeliverable(err);
                continue;
              }
              yield new CredentialsEnded(err);
              return;
            }
          }
          let comment: Comment;
          try {
            // The core reads the comment as the subscriber: one on a post they may not see is not found.
            comment = await core.comments.get(reader, next.commentId);
          } catch (err) {
            // The database away: answered with the error (the masking maps it and logs the outage
            // once), not dropped in silence; the stream stays open.
            if (isStoreUnavailable(err)) {
              yield new Undeliverable(err);
              continue;
            }
            // Hidden from this subscriber, or deleted since: nothing to deliver.
            logger.debug({ err: (err as Error).message }, 'commentAdded skipped');
            continue;
          }
          yield comment;
        }
      } finally {
        detach();
        streams.delete(stream);
      }
    }
    const stream = comments();
    // Ending the generator before its first pull would skip `finally`; detach on return as well.
    const originalReturn = stream.return.bind(stream);
    stream.return = (value) => {
      detach();
      streams.delete(stream);
      return originalReturn(value);
    };
    streams.add(stream);
    return stream;
  }

  /** Shutdown: every open stream ends (its transport then completes it) and the bridge stops. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearTimeout(this.announceTimer);
    this.stopResume?.();
    this.stopBridge?.();
    this.stopListening?.();
    await Promise.all([...this.streams].map((s) => s.return(undefined).catch(() => undefined)));
  }
}
