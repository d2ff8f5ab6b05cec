import { createClient as createSseClient } from 'graphql-sse';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Services } from '../../../src/compose.js';
import { newId } from '../../../src/domain/ids.js';
import { testDialect } from '../../helpers/database.js';
import {
  behindProxyForSuite,
  noted,
  poolEmptied,
  postgresMissing,
  REQUEST_BACK_LINE,
  REQUEST_OUTAGE_LINE,
  engineOutageError,
  FailingStatements,
} from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { StatementGate } from '../../helpers/statement-gate.js';
import { until } from '../../helpers/wait.js';
import { listeningAtrium, noStorageText, unavailableAt } from './support.js';
import { type Credentials, runOver, wsClient } from './transports.js';

const skip = await postgresMissing();

const SUBSCRIPTION =
  'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body author { handle } } }';
/** Two nested fields that load through the subscription's DataLoaders, each from its own table. */
const NESTED =
  'subscription Watch($postId: ID!) { commentAdded(postId: $postId) { id body author { id handle } post { id title } } }';
const ADD_COMMENT = `mutation($in: AddCommentInput!) { addComment(input: $in) {
  comment { id } errors { field message } } }`;

interface OutageEnv {
  base: string;
  services: Services;
  log: ReturnType<typeof memoryLog>;
  /** Holds a statement after it ran, so that the outage can start while its caller waits. */
  gate: StatementGate;
  /** The database cannot be reached from now on; `held` statements are being held by the gate. */
  start(held?: number): Promise<void>;
  end(): Promise<void>;
}

type Transport = 'WS' | 'SSE';

/** One live commentAdded subscription through the real client, keeping everything it is told. */
interface Sub {
  readonly name: string;
  readonly ids: string[];
  readonly errors: Array<Record<string, unknown>>;
  /** Every result in order: a comment's id, or the codes of its errors. */
  readonly results: string[];
  /** Every result in order, whole (data and errors) as the client handed it over. */
  readonly values: unknown[];
  readonly ended: { value: boolean };
  stop(): Promise<void>;
}

function subscribe(
  transport: Transport,
  base: string,
  postId: string,
  credentials: Credentials,
  query = SUBSCRIPTION,
): Sub {
  const ids: string[] = [];
  const errors: Array<Record<string, unknown>> = [];
  const results: string[] = [];
  const values: unknown[] = [];
  const ended = { value: false };
  const sink = {
    next: (v: {
      data?: { commentAdded: { id: string } } | null;
      errors?: Array<Record<string, unknown>>;
    }) => {
      values.push(v);
      if (v.data?.commentAdded) {
        ids.push(v.data.commentAdded.id);
        results.push(v.data.commentAdded.id);
      }
      if (v.errors) {
        errors.push(...v.errors);
        results.push(v.errors.map((e) => (e.extensions as { code?: string })?.code).join(','));
      }
    },
    error: (e: unknown) => {
      errors.push({ transportError: String(e) });
      ended.value = true;
    },
    complete: () => (ended.value = true),
  };
  const payload = { query, variables: { postId } };
  const name = `${transport} ${credentials['x-api-key'] ? 'with a key' : 'anonymous'}`;
  // The two clients differ only in how they are made; both subscribe and dispose alike.
  const client =
    transport === 'WS'
      ? wsClient(base, credentials)
      : createSseClient({
          url: `${base}/graphql/stream`,
          headers: credentials as Record<string, string>,
          retryAttempts: 0,
        });
  const off = client.subscribe(payload, sink as never);
  return {
    name,
    ids,
    errors,
    results,
    values,
    ended,
    stop: async () => {
      off();
      await client.dispose();
    },
  };
}

/** What a subscriber must be told for an event it cannot be given: no UNAUTHENTICATED, no storage text. */
const unavailable = unavailableAt(['commentAdded']);

/**
 * docs/graphql.md, Subscriptions, and docs/deployment.md, "When Redis or PostgreSQL fails": a
 * commentAdded event that arrives while the database cannot be reached (the subscriber's
 * credentials checked again, the comment read as the subscriber) is answered SERVICE_UNAVAILABLE at
 * `commentAdded`, REST's message, `retryAfter: 1`, never UNAUTHENTICATED nor storage text; the
 * subscription stays open, and the next event once the database answers reaches it. The outage is
 * one warning for the process, not one per event or subscriber. Through graphql-ws and graphql-sse,
 * with a key and anonymous (no credential check: the read meets the outage).
 */
function subscriptionOutageCases(env: () => OutageEnv) {
  let key: string;
  let authorId: string;
  let postId: string;
  const subs: Sub[] = [];

  beforeAll(async () => {
    const { services } = env();
    const user = await services.core.users.create({
      handle: `suboutage${testDialect()}`,
      email: `suboutage${testDialect()}@example.com`,
      name: 'Outage',
      role: 'member',
    });
    authorId = user.id;
    key = (await services.apiKeys.create({ userId: authorId, tier: 'enterprise' })).key;
    const actor = { id: authorId, kind: 'user' as const, role: 'member' as const };
    postId = (await services.core.posts.create(actor, { title: 'Watched', body: 'b', authorId })).id;
  });
  afterEach(async () => {
    await Promise.all(subs.splice(0).map((s) => s.stop()));
  });

  async function addComment(body: string, as = { authorId, key }): Promise<string> {
    const answer = await runOver(
      'POST',
      env().base,
      { query: ADD_COMMENT, variables: { in: { postId, body, authorId: as.authorId } } },
      { 'x-api-key': as.key },
    );
    const added = (answer.data as { addComment: { comment: { id: string } | null } } | undefined)?.addComment;
    expect(added?.comment, JSON.stringify(answer)).toBeTruthy();
    return added!.comment!.id;
  }

  it('an event during the outage: SERVICE_UNAVAILABLE, the subscription stays open, the next event arrives', async () => {
    const { base, services, log } = env();
    for (const transport of ['WS', 'SSE'] as const) {
      subs.push(subscribe(transport, base, postId, { 'x-api-key': key }));
      subs.push(subscribe(transport, base, postId, {}));
    }
    // Every subscription is live once a comment added reaches all of them (the clients set them up
    // in the background): comments are added until one does.
    let first = '';
    await until(async () => {
      first = await addComment('before');
      await new Promise((resolve) => setTimeout(resolve, 200));
      return subs.every((s) => s.ids.includes(first));
    }, 'a comment delivered to all');
    const heard = new Map(subs.map((s) => [s, s.results.length - 1]));
    const before = log.lines.length;

    await env().start();
    // Published while the database is away (the broadcast does not need it): the signal the core
    // sends after a commit, for two comments, so that the outage is seen to be logged once, not
    // per event. Ids of their own: the feed hands a comment id out once, and `first` was.
    for (let i = 0; i < 2; i++) {
      services.bus.emit({ kind: 'comment.added', commentId: newId('cmt'), postId });
      // Given time to arrive; what arrived (or did not) is asserted below, with the whole story.
      await until(
        () => subs.every((s) => s.errors.length >= i + 1 || s.ended.value),
        `event ${i + 1} answered`,
      ).catch(() => undefined);
    }
    const whileAway = noted(log.lines.slice(before));
    for (const sub of subs) {
      expect({ errors: sub.errors, ended: sub.ended.value }, sub.name).toEqual({
        errors: [unavailable, unavailable],
        ended: false,
      });
      expect(JSON.stringify(sub.errors), sub.name).not.toContain('UNAUTHENTICATED');
      noStorageText(sub.errors);
    }
    expect(whileAway.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE]);
    expect(JSON.stringify(whileAway)).not.toContain('stack');

    await env().end();
    const second = await addComment('after');
    await until(
      () => subs.every((s) => s.ids.includes(second)),
      'the comment after the outage delivered to all',
    );
    for (const sub of subs) {
      expect(sub.ended.value, sub.name).toBe(false);
      expect(sub.results.slice(heard.get(sub)), sub.name).toEqual([
        first,
        'SERVICE_UNAVAILABLE',
        'SERVICE_UNAVAILABLE',
        second,
      ]);
    }
    const lines = noted(log.lines.slice(before));
    expect(lines.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE, REQUEST_BACK_LINE]);
  }, 30_000);

  /**
   * The comment is read while the database answers; the outage starts before a nested field of the
   * selection loads (`author`, through the subscription's DataLoader). GraphQL's answer: null up
   * to the nearest nullable parent (`author: User!` and `commentAdded: Comment!` are not null, so
   * `data` is null) and SERVICE_UNAVAILABLE at the field's own path, REST's message, `retryAfter: 1`,
   * no storage text; the subscription stays open, and the next event once the database answers is
   * whole, the author who could not be read included. One warning for the outage, one line for its
   * end. One subscriber per outage: each must read its comment before the database goes, and on
   * SQLite a held statement holds the one connection.
   */
  it.each([
    ['WS', 'with a key'],
    ['WS', 'anonymous'],
    ['SSE', 'with a key'],
    ['SSE', 'anonymous'],
  ] as const)(
    'a nested field meeting the outage (%s %s): null up to commentAdded, SERVICE_UNAVAILABLE at its path; the next event is whole',
    async (transport, who) => {
      const withKey = who === 'with a key';
      const { base, services, log, gate } = env();
      const handle = `nested${transport}${withKey ? 'key' : 'anon'}${testDialect()}`.toLowerCase();
      // A commenter of their own, whose comments are stored before the subscription starts (so no
      // event has carried them): each event's loaders are new, so the author is read from the
      // store when the event executes, and the gate can hold the comment's read before it.
      const other = await services.core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: 'Nested Author',
        role: 'member',
      });
      const otherKey = (await services.apiKeys.create({ userId: other.id, tier: 'enterprise' })).key;
      const otherActor = { id: other.id, kind: 'user' as const, role: 'member' as const };
      const waiting = (
        await services.core.comments.add(otherActor, { postId, body: 'while away', authorId: other.id })
      ).id;
      // The second event stands for a comment of its own: the feed hands each comment id to a
      // subscription once, and the first was answered (with the outage) already.
      const waitingToo = (
        await services.core.comments.add(otherActor, { postId, body: 'still away', authorId: other.id })
      ).id;

      const sub = subscribe(transport, base, postId, withKey ? { 'x-api-key': key } : {}, NESTED);
      subs.push(sub);
      let first = '';
      await until(async () => {
        first = await addComment('before');
        await new Promise((resolve) => setTimeout(resolve, 200));
        return sub.ids.includes(first);
      }, 'a comment delivered');
      const heard = sub.values.length;
      const before = log.lines.length;

      // The event's comment is read; before its result goes back (and the author is asked for),
      // the database goes.
      const read = gate.hold('SelectQueryNode', 'comments');
      services.bus.emit({ kind: 'comment.added', commentId: waiting, postId });
      await read.reached;
      await env().start(1);
      read.release();
      await until(() => sub.values.length > heard || sub.ended.value, 'the event answered');
      // One more while the database is away, now met by the comment's read (or the credential
      // check): still one outage in the log.
      services.bus.emit({ kind: 'comment.added', commentId: waitingToo, postId });
      await until(() => sub.values.length > heard + 1 || sub.ended.value, 'the second event answered').catch(
        () => undefined,
      );
      const whileAway = noted(log.lines.slice(before));
      const told = sub.values.slice(heard);
      expect({ told, ended: sub.ended.value }).toEqual({
        told: [
          // Each event's loaders are new, so `author` and `post` both load from the store, at once:
          // whichever meets the outage first is the error that nulls `commentAdded`.
          {
            data: null,
            errors: [
              { ...unavailableAt([]), path: ['commentAdded', expect.stringMatching(/^(author|post)$/)] },
            ],
          },
          { data: null, errors: [unavailable] },
        ],
        ended: false,
      });
      noStorageText(told);
      expect(whileAway.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE]);
      expect(JSON.stringify(whileAway)).not.toContain('stack');

      await env().end();
      const second = await addComment('after', { authorId: other.id, key: otherKey });
      // Whatever it is told for that comment (a failure the loader kept would show here).
      await until(
        () => sub.values.length > heard + 2 || sub.ended.value,
        'the event after the outage answered',
      );
      expect(sub.ended.value).toBe(false);
      expect(sub.values.slice(heard + 2)).toEqual([
        {
          data: {
            commentAdded: {
              id: second,
              body: 'after',
              author: { id: other.id, handle },
              post: { id: postId, title: 'Watched' },
            },
          },
        },
      ]);
      const lines = noted(log.lines.slice(before));
      expect(lines.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE, REQUEST_BACK_LINE]);
    },
    30_000,
  );
}

describe.skipIf(skip !== undefined)('commentAdded meeting PostgreSQL gone (a proxy the test cuts)', () => {
  const log = memoryLog('info');
  const gate = new StatementGate();
  const behind = behindProxyForSuite({}, ['api'], { logger: log.logger, storePlugins: [gate] });
  subscriptionOutageCases(() => ({
    base: behind.httpUrl,
    services: behind.atrium.services,
    log,
    gate,
    async start(held = 0) {
      await behind.cutDatabase();
      // Statements must connect through the cut proxy (ECONNREFUSED), not meet a dropped connection;
      // a held statement keeps its connection until it answers.
      await poolEmptied(behind.atrium.services.store, held);
    },
    end: () => behind.restoreDatabase(),
  }));
});

describe(`commentAdded meeting the database gone (${testDialect()}: its statements fail as in an outage)`, () => {
  const log = memoryLog('info');
  const outageSwitch = new FailingStatements();
  const gate = new StatementGate();
  // The switch first: a statement the gate holds has passed it, and answers.
  const server = listeningAtrium({}, { logger: log.logger, storePlugins: [outageSwitch, gate] });
  const outage = engineOutageError();
  subscriptionOutageCases(() => ({
    base: server.base,
    services: server.atrium.services,
    log,
    gate,
    async start() {
      outageSwitch.failing = outage;
    },
    async end() {
      outageSwitch.failing = undefined;
    },
  }));
});
