import type { Selectable } from 'kysely';
import type { EventsTable } from '../store/types.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import type { Viewer } from './user-policies.js';
import type { UserService } from './users.js';

/** One thing that happened to a user: a row of the `events` outbox whose owner is that user. */
export interface UserActivityEvent {
  id: string;
  type: string;
  /** Unix seconds. */
  created: number;
  /** Flat facts as text: `event_id`, the event's scalar fields, `<name>_id` of nested objects, lists joined by ",". */
  metadata: Record<string, string>;
}

export interface FollowOptions {
  /** How many recent events to send first (oldest first). */
  recent?: number;
  /** Ends the stream. */
  signal: AbortSignal;
  /** How often the shared event table is read for events committed by other instances. */
  pollMs?: number;
  /**
   * The viewer as they are now, asked before live events are sent: the read rule is applied again
   * to them, so a viewer who may no longer read the user (an admin demoted since) gets forbidden
   * instead of the events. Rejecting ends the stream with that error. Without it, the viewer the
   * stream began with is kept.
   */
  viewerNow?: () => Promise<Viewer>;
}

export const RECENT_ACTIVITY = 20;
const MAX_RECENT_ACTIVITY = 100;
const POLL_MS = 1_000;
/**
 * Events are looked for this far back on every read, so one committed late on another instance
 * (a slow transaction, a clock a little behind) is still found; ids already seen are skipped. The
 * events in this window when the stream opens count as seen, sent or not: only the last
 * `recent` of them belong to the history, and the rest are older, not live.
 */
const LOOKBACK_MS = 10_000;

/**
 * A user's activity: their recent events, then live ones as they are committed on any instance.
 * The outbox table every instance writes is the shared source, so no broadcast layer is needed:
 * a change committed here wakes the reader at once through the bus, one committed elsewhere is
 * found by the next poll.
 */
export class UserActivity {
  constructor(
    private readonly deps: CoreDeps,
    private readonly users: UserService,
  ) {}

  /**
   * Yields events until `signal` aborts. The viewer must be the user or an admin (the read rule);
   * an unknown or deleted user is not_found, both checked before anything is sent. A user deleted
   * while followed ends the stream with not_found too, after the events committed before it: a
   * change here is seen at once, one made by another process (the CLI) at the next poll.
   */
  async *follow(viewer: Viewer, userId: string, options: FollowOptions): AsyncGenerator<UserActivityEvent> {
    await this.users.read(viewer, userId);
    const { signal } = options;
    const recentCount = Math.min(Math.max(options.recent ?? RECENT_ACTIVITY, 0), MAX_RECENT_ACTIVITY);
    const pollMs = options.pollMs ?? POLL_MS;

    // Listen before the first read so nothing committed in between is missed.
    let wake: (() => void) | undefined;
    let pending = false;
    const stop = this.deps.bus.on('event.recorded', () => {
      pending = true;
      wake?.();
    });
    const stopUser = this.deps.bus.on('user.changed', (changed) => {
      if (changed.userId !== userId) return;
      pending = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      /** Ids already sent, or deliberately not sent: each with its time, dropped once out of the window. */
      const seen = new Map<string, number>();
      let since = this.deps.clock.now().getTime() - LOOKBACK_MS;
      // One statement, so one snapshot (PostgreSQL's READ COMMITTED takes one per statement): the
      // last `recentCount` events, and every event the first live read's window will hold that is
      // already committed. The window's older events are marked seen without being sent: they were
      // there to be read, they are not among the last ones, so they are not news. Only events that
      // commit after this statement are, late ones with older ids or times included.
      const known = await this.deps.store.db
        .selectFrom('events')
        .selectAll()
        .where('owner_id', '=', userId)
        .where((eb) =>
          eb.or([
            eb('created_at', '>=', iso(new Date(since))),
            eb(
              'id',
              'in',
              eb
                .selectFrom('events')
                .select('id')
                .where('owner_id', '=', userId)
                .orderBy('id', 'desc')
                .limit(recentCount),
            ),
          ]),
        )
        .orderBy('id', 'desc')
        .execute();
      for (const row of known) seen.set(row.id, Date.parse(row.created_at));
      // The newest ids come first and the last `recentCount` ids are all there: those are the recent ones.
      for (const row of known.slice(0, recentCount).reverse()) {
        if (signal.aborted) return;
        yield toActivity(row);
      }
      while (!signal.aborted) {
        const readAt = this.deps.clock.now().getTime();
        const rows = await this.deps.store.db
          .selectFrom('events')
          .selectAll()
          .where('owner_id', '=', userId)
          .where('created_at', '>=', iso(new Date(since)))
          .orderBy('id', 'asc')
          .execute();
        const fresh = rows.filter((row) => !seen.has(row.id));
        // Once per read, not per event: the credentials and the read rule, for the whole batch.
        if (fresh.length > 0 && options.viewerNow) await this.users.read(await options.viewerNow(), userId);
        for (const row of fresh) {
          if (signal.aborted) return;
          seen.set(row.id, Date.parse(row.created_at));
          yield toActivity(row);
        }
        since = readAt - LOOKBACK_MS;
        for (const [id, at] of seen) if (at < since) seen.delete(id);
        // Deletion records no event, so whether the user still exists is read on every round.
        await this.users.get(userId);
        if (pending) {
          pending = false;
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
          if (signal.aborted || pending) wake();
        });
        wake = undefined;
        pending = false;
      }
    } finally {
      stop();
      stopUser();
      signal.removeEventListener('abort', onAbort);
    }
  }
}

function toActivity(row: Selectable<EventsTable>): UserActivityEvent {
  const metadata: Record<string, string> = { event_id: row.id };
  let data: unknown;
  try {
    data = JSON.parse(row.data);
  } catch {
    data = {};
  }
  if (data && typeof data === 'object') {
    for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
      if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
        metadata[key] = String(value);
      } else if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
        metadata[key] = value.join(',');
      } else if (value && typeof value === 'object' && typeof (value as { id?: unknown }).id === 'string') {
        metadata[`${key}_id`] = (value as { id: string }).id;
      }
    }
  }
  return { id: row.id, type: row.type, created: Number(row.created), metadata };
}
