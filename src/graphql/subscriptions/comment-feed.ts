import { GraphQLError } from 'graphql';
import type { Principal } from '../../auth/principal.js';
import type { Services } from '../../compose.js';
import type { Comment } from '../../domain/comments.js';
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

type Waiter = (message: CommentAdded) => void;

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
 */
export class CommentFeed {
  private readonly byPost = new Map<string, Set<Waiter>>();
  private readonly streams = new Set<AsyncGenerator<Comment | Undeliverable>>();
  private stopListening: (() => void) | undefined;
  private stopBridge: (() => void) | undefined;

  constructor(private readonly services: Services) {}

  async start(): Promise<void> {
    const { bus, broadcast, sharedHealth } = this.services;
    this.stopListening = await broadcast.subscribe(CHANNEL, (m) => {
      if (!isCommentAdded(m)) return;
      for (const waiter of [...(this.byPost.get(m.postId) ?? [])]) waiter(m);
    });
    this.stopBridge = bus.on('comment.added', (signal) => {
      const message: CommentAdded = { commentId: signal.commentId, postId: signal.postId };
      broadcast.publish(CHANNEL, message).catch((err: Error) => {
        // At most once: a comment the broadcast could not carry to other instances is not retried
        // (this instance's subscribers have it all the same). Counted and logged once per Redis
        // outage, as the other shared parts are, not once per comment.
        sharedHealth.degraded(
          'broadcast',
          'comment events reach only the GraphQL subscribers of this instance',
          err,
        );
      });
    });
  }

  /**
   * Comments added to `postId` from now on that `viewer` may see. Each one is read through the core
   * as the subscriber when it arrives, so a draft's comments reach only its author and admins, and
   * a post published later starts delivering.
   *
   * `recheck` authenticates the subscriber's credentials again before each delivery: a key revoked
   * or a user deleted since the subscription began (by any process) ends the stream with that error
   * instead of the comment. An event met by a database that cannot be reached (the check, or the
   * read of the comment) is answered with that error instead, and the stream stays open: the next
   * event once the database answers is delivered (docs/graphql.md, Subscriptions).
   */
  subscribe(
    postId: string,
    viewer: Principal | null,
    recheck?: () => Promise<void>,
  ): AsyncGenerator<Comment | Undeliverable> {
    const { core, logger } = this.services;
    const pending: CommentAdded[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    const waiter: Waiter = (m) => {
      pending.push(m);
      wake?.();
    };
    let set = this.byPost.get(postId);
    if (!set) this.byPost.set(postId, (set = new Set()));
    set.add(waiter);
    const detach = () => {
      done = true;
      set.delete(waiter);
      if (set.size === 0 && this.byPost.get(postId) === set) this.byPost.delete(postId);
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
          if (recheck) {
            try {
              await recheck();
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
            comment = await core.comments.get(viewer, next.commentId);
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
    this.stopBridge?.();
    this.stopListening?.();
    await Promise.all([...this.streams].map((s) => s.return(undefined).catch(() => undefined)));
  }
}
