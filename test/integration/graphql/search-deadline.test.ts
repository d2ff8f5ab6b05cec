import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialect } from '../../helpers/database.js';
import { listeningAtrium } from './support.js';

const TIMEOUT_MS = 1_000;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A search the request deadline abandons stops on PostgreSQL too, instead of running on after the
 * 503. The slow statement is real: another session holds an exclusive lock on posts, so the search
 * waits on it until it is cancelled (or, without cancellation, until the lock goes).
 */
describe.runIf(testDialect() === 'postgres')('search past the request deadline', () => {
  const server = listeningAtrium({ REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) });
  let locker: pg.Client;

  beforeAll(async () => {
    locker = new pg.Client({ connectionString: server.atrium.database.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker.end();
  });

  /** Statements of other sessions of this database still running a search. */
  const searching = async (): Promise<number> => {
    // Inside the locking transaction the activity view is a snapshot: refresh it on every look.
    await locker.query('select pg_stat_clear_snapshot()');
    const { rows } = await locker.query<{ n: string }>(
      `select count(*) as n from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid()
         and state = 'active' and query like '%plainto_tsquery%'`,
    );
    return Number(rows[0]!.n);
  };

  /** POSTs `query` to /graphql with `accept`; the status, once the body is read. */
  const post = async (query: string, accept = 'application/json') => {
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: JSON.stringify({ query }),
    });
    return { status: res.status, body: (await res.json()) as { errors?: unknown } };
  };
  const SEARCH = '{ search(query: "bulk") { __typename } }';

  /**
   * Searches still running, once the server has had a while to act on its cancels (they are sent as
   * the deadline passes). Without cancellation a search waits on the lock for as long as it is held.
   */
  const searchingAfterCancels = async (): Promise<number> => {
    let left = await searching();
    for (let i = 0; i < 50 && left > 0; i++) {
      await pause(100);
      left = await searching();
    }
    return left;
  };

  /** Runs `fn` while another session holds posts locked, so a search waits until it is cancelled. */
  const whilePostsLocked = async (fn: () => Promise<void>) => {
    await locker.query('begin');
    try {
      await locker.query('lock table posts in access exclusive mode');
      await fn();
    } finally {
      await locker.query('rollback');
    }
  };

  // The direct path and Yoga's (an Accept only Yoga takes) hand the resolver different signals.
  it.each([
    ['direct', 'application/json'],
    ['Yoga', 'application/json; charset=utf-8'],
  ])('answers 503 at the deadline and cancels the statement on the server (%s)', async (_path, accept) => {
    await whilePostsLocked(async () => {
      expect((await post(SEARCH, accept)).status).toBe(503);
      expect(await searchingAfterCancels()).toBe(0);
    });
  });

  it('cancels abandoned searches that hold every pooled connection, and the pool serves again', async () => {
    // More searches than the pool's 10 connections: the cancels cannot wait for one of those.
    const searches = 12;
    await whilePostsLocked(async () => {
      const answers = await Promise.all(
        Array.from({ length: searches }, async () => (await post(SEARCH)).status),
      );
      expect(answers).toEqual(Array.from({ length: searches }, () => 503));
      // Cancelled while the lock is still held: nothing but the cancel could have ended them.
      expect(await searchingAfterCancels()).toBe(0);
    });
    const after = await post('{ posts(first: 1) { edges { node { id } } } }');
    expect(after.status).toBe(200);
    expect(after.body.errors).toBeUndefined();
  });
});
