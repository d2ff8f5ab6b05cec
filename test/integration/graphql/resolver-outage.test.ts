import { ApolloClient, CombinedGraphQLErrors, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { type Client as WsClient, createClient as createWsClient } from 'graphql-ws';
import type { PluginTransformResultArgs } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Services } from '../../../src/compose.js';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
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
import { until } from '../../helpers/wait.js';
import { listeningAtrium, noStorageText, unavailableAt } from './support.js';
import { type Answer, type Credentials, type Operation, runOver } from './transports.js';

const skip = await postgresMissing();

/**
 * FailingStatements that can also run `then` once the next statement has answered, before its
 * result goes back: the request that sent it carries on into the outage `then` starts.
 */
class OutageSwitch extends FailingStatements {
  then: (() => Promise<void>) | undefined;
  override async transformResult(args: PluginTransformResultArgs) {
    const result = await super.transformResult(args);
    const then = this.then;
    this.then = undefined;
    await then?.();
    return result;
  }
}

/** A listening Atrium whose database the test can take away and give back. */
interface OutageEnv {
  base: string;
  services: Services;
  log: ReturnType<typeof memoryLog>;
  switch: OutageSwitch;
  /** The database cannot be reached from now on; `inStatement` when called from inside one. */
  start(inStatement?: boolean): Promise<void>;
  end(): Promise<void>;
}

// A well-formed id of no post: one that cannot be a post id is answered without a read.
const PARTIAL = '{ __typename post(id: "pst_00000000000000000000000000") { title } }';
const POSTS = '{ posts(first: 5) { totalCount } }';
const CREATE = `mutation($in: CreatePostInput!) { createPost(input: $in) { post { title } errors { message } } }`;

/** One operation on an open graphql-ws client: its one result, or the errors it failed with. */
function overWs(client: WsClient, op: Operation): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let answer: Answer | undefined;
    client.subscribe({ ...op, query: op.query ?? '' } as never, {
      next: (value) => (answer = { status: 101, ...(value as object) }),
      error: (err) =>
        Array.isArray(err) ? resolve({ status: 101, errors: err as Answer['errors'] }) : reject(err),
      complete: () => resolve(answer ?? { status: 101 }),
    });
  });
}

/**
 * A resolver that meets the database outage mid-operation answers SERVICE_UNAVAILABLE at its path,
 * REST's fixed message, `retryAfter: 1`, no storage text, on every transport through the clients
 * users use (fetch, Apollo Client, graphql-ws, graphql-sse); once the database is back the same
 * operation succeeds; the outage is one warning and its end one line (docs/graphql.md, Errors).
 */
function resolverOutageCases(env: () => OutageEnv) {
  let credentials: Credentials;
  let authorId: string;
  const create = (title: string): Operation => ({
    query: CREATE,
    variables: { in: { title, body: 'Body', authorId } },
  });
  const created = (title: string) => ({ createPost: { post: { title }, errors: [] } });

  beforeAll(async () => {
    const { services } = env();
    const user = await services.core.users.create({
      handle: `resolveroutage${testDialect()}`,
      email: `resolveroutage${testDialect()}@example.com`,
      name: 'Outage',
      role: 'member',
    });
    authorId = user.id;
    credentials = {
      'x-api-key': (await services.apiKeys.create({ userId: user.id, tier: 'enterprise' })).key,
    };
    // The key's first use records it (an UPDATE on the side); done here, so that the statement
    // `then` waits for in a test is the key check itself.
    expect((await runOver('POST', env().base, { query: '{ me { id } }' }, credentials)).data).toEqual({
      me: { id: authorId },
    });
    await until(async () => {
      const row = await services.store.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('user_id', '=', authorId)
        .executeTakeFirst();
      return row?.last_used_at != null;
    }, 'the key recorded as used');
  });

  /**
   * One graphql-ws connection with the test user's key, opened at once (not lazy) and kept for every
   * operation of a test: its connection_init is checked while the database answers.
   */
  const openSocket = () =>
    createWsClient({
      url: `${env().base.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: credentials,
      retryAttempts: 0,
      lazy: false,
    });

  /**
   * Runs `during` in an outage, ends it, and checks it was logged as one outage (one warning, no
   * stack) and its end as one line standing for `failures` failures.
   */
  async function inOutage(during: () => Promise<void>, failures?: number) {
    const { log } = env();
    const before = log.lines.length;
    let whileAway: Array<Record<string, unknown>>;
    try {
      await during();
      whileAway = noted(log.lines.slice(before));
    } finally {
      await env().end();
      // A statement the database answers ends the outage in the log, whatever `during` met, so
      // the next test starts without one.
      const back = await runOver('POST', env().base, { query: '{ __typename }' });
      expect(back.status).toBe(200);
      await runOver('POST', env().base, { query: POSTS });
    }
    expect(whileAway.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE]);
    expect(JSON.stringify(whileAway)).not.toContain('stack');
    const lines = noted(log.lines.slice(before));
    expect(lines.map((l) => l.msg)).toEqual([REQUEST_OUTAGE_LINE, REQUEST_BACK_LINE]);
    if (failures !== undefined) expect(lines[1]!.failures).toBe(failures);
  }

  it.each(['POST', 'GET'] as const)(
    '%s (fetch): SERVICE_UNAVAILABLE at the path, data null or partial, HTTP 200; then it succeeds',
    async (transport) => {
      await inOutage(async () => {
        await env().start();
        const whole = await runOver(transport, env().base, { query: POSTS });
        expect(whole.status).toBe(200);
        expect(whole.data).toBeNull();
        expect(whole.errors).toEqual([unavailableAt(['posts'])]);
        noStorageText(whole);
        const partial = await runOver(transport, env().base, { query: PARTIAL });
        expect(partial.status).toBe(200);
        expect(partial.data).toEqual({ __typename: 'Query', post: null });
        expect(partial.errors).toEqual([unavailableAt(['post'])]);
        noStorageText(partial);
      });
      expect(await runOver(transport, env().base, { query: POSTS })).toMatchObject({
        status: 200,
        data: { posts: { totalCount: expect.any(Number) } },
      });
      expect((await runOver(transport, env().base, { query: PARTIAL })).errors).toBeUndefined();
    },
  );

  it('POST (fetch), a mutation: SERVICE_UNAVAILABLE, then the same mutation succeeds', async () => {
    const op = create('Over POST');
    await inOutage(async () => {
      // The key is checked while the database answers; the mutation meets the outage.
      env().switch.then = () => env().start(true);
      const answer = await runOver('POST', env().base, op, credentials);
      expect(env().switch.then).toBeUndefined();
      expect(answer.status).toBe(200);
      expect(answer.data).toBeNull();
      expect(answer.errors).toEqual([unavailableAt(['createPost'])]);
      noStorageText(answer);
    });
    expect((await runOver('POST', env().base, op, credentials)).data).toEqual(created('Over POST'));
  });

  it('Apollo Client: the error carries the code, the message and retryAfter; then the query succeeds', async () => {
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: `${env().base}/graphql` }),
    });
    const query = gql(POSTS);
    await inOutage(async () => {
      await env().start();
      const result = await client.query({ query, errorPolicy: 'all', fetchPolicy: 'network-only' });
      expect(CombinedGraphQLErrors.is(result.error)).toBe(true);
      const errors = (result.error as CombinedGraphQLErrors).errors;
      expect(errors).toEqual([unavailableAt(['posts'])]);
      noStorageText(errors);
    });
    const again = await client.query({ query, fetchPolicy: 'network-only' });
    expect(again.error).toBeUndefined();
    expect(again.data).toEqual({ posts: { __typename: 'PostConnection', totalCount: expect.any(Number) } });
  });

  it('graphql-ws: a query and a mutation on an open connection; then both succeed on it', async () => {
    // Each operation's credentials are checked again, as a POST's are; the outage starts once that
    // check has answered, so the resolver meets it.
    const client = openSocket();
    try {
      expect((await overWs(client, { query: POSTS })).data).toBeDefined();
      const op = create('Over WebSocket');
      for (const [operation, path] of [
        [{ query: POSTS }, 'posts'],
        [op, 'createPost'],
      ] as const) {
        await inOutage(async () => {
          env().switch.then = () => env().start(true);
          const answer = await overWs(client, operation);
          expect(env().switch.then).toBeUndefined();
          expect(answer.data).toBeNull();
          expect(answer.errors).toEqual([unavailableAt([path])]);
          noStorageText(answer);
        });
      }
      expect((await overWs(client, { query: POSTS })).data).toMatchObject({
        posts: { totalCount: expect.any(Number) },
      });
      expect((await overWs(client, op)).data).toEqual(created('Over WebSocket'));
    } finally {
      await client.dispose();
    }
  });

  it('graphql-ws: an operation whose credential check meets the outage is SERVICE_UNAVAILABLE, not UNAUTHENTICATED; the socket stays', async () => {
    const client = openSocket();
    try {
      expect((await overWs(client, { query: '{ me { id } }' })).data).toEqual({ me: { id: authorId } });
      await inOutage(async () => {
        await env().start();
        for (let i = 0; i < 2; i++) {
          const answer = await overWs(client, { query: '{ me { id } }' });
          expect(answer.data).toBeUndefined();
          expect(answer.errors).toEqual([
            {
              message: STORE_UNAVAILABLE_MESSAGE,
              extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 1 },
            },
          ]);
          noStorageText(answer);
        }
      }, 2);
      expect((await overWs(client, { query: '{ me { id } }' })).data).toEqual({ me: { id: authorId } });
    } finally {
      await client.dispose();
    }
  });

  it('graphql-sse: a query and a mutation; then both succeed', async () => {
    const op = create('Over SSE');
    await inOutage(async () => {
      // The key is checked while the database answers; the mutation meets the outage, and the
      // anonymous query after it (no credential check) too.
      env().switch.then = () => env().start(true);
      const mutation = await runOver('SSE', env().base, op, credentials);
      expect(env().switch.then).toBeUndefined();
      const query = await runOver('SSE', env().base, { query: POSTS });
      for (const [answer, path] of [
        [query, 'posts'],
        [mutation, 'createPost'],
      ] as const) {
        expect(answer.status).toBe(200);
        expect(answer.data).toBeNull();
        expect(answer.errors).toEqual([unavailableAt([path])]);
        noStorageText(answer);
      }
    });
    expect((await runOver('SSE', env().base, { query: POSTS })).data).toMatchObject({
      posts: { totalCount: expect.any(Number) },
    });
    expect((await runOver('SSE', env().base, op, credentials)).data).toEqual(created('Over SSE'));
  });

  it('a POST whose credential check meets the outage is checked once: one failure per request', async () => {
    await inOutage(async () => {
      await env().start();
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${env().base}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', ...credentials },
          body: JSON.stringify({ query: '{ me { id } }' }),
        });
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        const body = (await res.json()) as Answer;
        expect(body.errors).toEqual([
          { message: STORE_UNAVAILABLE_MESSAGE, extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 1 } },
        ]);
      }
    }, 3);
  });
}

describe.skipIf(skip !== undefined)('a resolver meeting PostgreSQL gone (a proxy the test cuts)', () => {
  const log = memoryLog('info');
  const outageSwitch = new OutageSwitch();
  const behind = behindProxyForSuite({}, ['api'], { logger: log.logger, storePlugins: [outageSwitch] });
  resolverOutageCases(() => ({
    base: behind.httpUrl,
    services: behind.atrium.services,
    log,
    switch: outageSwitch,
    async start(inStatement = false) {
      await behind.cutDatabase();
      // New statements must connect through the cut proxy (ECONNREFUSED); the one running keeps its
      // connection until it answers.
      await poolEmptied(behind.atrium.services.store, inStatement ? 1 : 0);
    },
    end: () => behind.restoreDatabase(),
  }));
});

describe(`a resolver meeting the database gone (${testDialect()}: its statements fail as in an outage)`, () => {
  const log = memoryLog('info');
  const outageSwitch = new OutageSwitch();
  const server = listeningAtrium({}, { logger: log.logger, storePlugins: [outageSwitch] });
  const outage = engineOutageError();
  resolverOutageCases(() => ({
    base: server.base,
    services: server.atrium.services,
    log,
    switch: outageSwitch,
    async start() {
      outageSwitch.failing = outage;
    },
    async end() {
      outageSwitch.failing = undefined;
    },
  }));
});
