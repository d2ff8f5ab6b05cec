import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
  REQUEST_OUTAGE_LINE,
  REQUEST_BACK_LINE,
  noted,
  poolEmptied,
} from '../../helpers/database-outage.js';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { codesOf, runOver, type Answer, type Credentials } from './transports.js';
import { until } from '../../helpers/wait.js';

const skip = await postgresMissing();

const OUTAGE = REQUEST_OUTAGE_LINE;
const BACK = REQUEST_BACK_LINE;

/**
 * Runs `then` (the test cuts the database there) after the next statement the database answers,
 * before its result goes back: the request that sent it carries on with the database gone.
 */
class AfterNextAnswer implements KyselyPlugin {
  then: (() => Promise<void>) | undefined;
  transformQuery({ node }: PluginTransformQueryArgs) {
    return node;
  }
  async transformResult({ result }: PluginTransformResultArgs) {
    const then = this.then;
    this.then = undefined;
    await then?.();
    return result;
  }
}

const noStorageText = (answer: Answer) =>
  expect(JSON.stringify(answer)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres|terminat|queryable|stack/i);

/**
 * docs/deployment.md, "What is logged while PostgreSQL is away": GraphQL follows the process's one
 * rule. A resolver that meets the outage mid-operation is answered SERVICE_UNAVAILABLE at its path
 * and a credential check that meets it SERVICE_UNAVAILABLE with 503, but the outage is one warning (driver's message and code, no stack) and its end one line, not
 * `graphql operation failed` with a stack per error. POST over a socket, PostgreSQL behind a proxy
 * the test cuts.
 */
describe.skipIf(skip !== undefined)('the GraphQL log while PostgreSQL is unreachable', () => {
  const log = memoryLog('info');
  const afterNextAnswer = new AfterNextAnswer();
  let behind: ListeningBehindProxy;
  let userId: string;
  let credentials: Credentials;

  beforeAll(async () => {
    behind = await startListeningBehindProxy({}, ['api'], {
      logger: log.logger,
      storePlugins: [afterNextAnswer],
    });
    const { services } = behind.atrium;
    const user = await services.core.users.create({
      handle: 'outagegraphqllog',
      email: 'outagegraphqllog@example.com',
      name: 'Outage',
      role: 'member',
    });
    userId = user.id;
    credentials = { 'x-api-key': (await services.apiKeys.create({ userId, tier: 'enterprise' })).key };
  });
  afterAll(() => behind?.stop());

  const me = (c: Credentials = credentials) => runOver('POST', behind.httpUrl, { query: '{ me { id } }' }, c);
  const posts = () => runOver('POST', behind.httpUrl, { query: '{ posts(first: 5) { totalCount } }' });

  it('logs the outage once and its end once, whether resolvers or credential checks meet it', async () => {
    expect((await me()).data).toEqual({ me: { id: userId } });
    // The key's first use records it (an UPDATE sent on the side): done before the plugin is armed,
    // so the statement it waits for is the key check of the next request.
    const keyUsed = async () => {
      const row = await behind.atrium.services.store.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('user_id', '=', userId)
        .executeTakeFirst();
      return row?.last_used_at != null;
    };
    await until(keyUsed, 'the key recorded as used');
    const before = log.lines.length;

    // The key is checked while the database answers; it is gone before `me` reads the user.
    afterNextAnswer.then = async () => {
      await behind.cutDatabase();
      // Every connection but the one lent to this statement has been dropped.
      await poolEmptied(behind.atrium.services.store, 1);
    };
    const midOperation = await me();
    expect(afterNextAnswer.then).toBeUndefined();
    expect(midOperation.status).toBe(200);
    expect(midOperation.data).toBeNull();
    expect(midOperation.errors).toEqual([
      expect.objectContaining({ message: STORE_UNAVAILABLE_MESSAGE, path: ['me'] }),
    ]);
    expect(codesOf(midOperation)).toEqual(['SERVICE_UNAVAILABLE']);
    noStorageText(midOperation);

    // Anonymous reads pass the credential step and meet the outage in their resolver.
    for (let i = 0; i < 3; i++) {
      const answer = await posts();
      expect(answer.data).toBeNull();
      expect(codesOf(answer)).toEqual(['SERVICE_UNAVAILABLE']);
      noStorageText(answer);
    }
    // With a key, the credential check meets it first.
    for (let i = 0; i < 2; i++) {
      const answer = await me();
      expect(answer.status).toBe(503);
      expect(codesOf(answer)).toEqual(['SERVICE_UNAVAILABLE']);
      noStorageText(answer);
    }

    const during = noted(log.lines.slice(before));
    expect(during.map((l) => l.msg)).toEqual([OUTAGE]);
    expect(during[0]).toMatchObject({ level: 40 });
    expect(during[0]!.err).toMatch(/ECONNREFUSED|Connection terminated|not queryable/);
    expect(JSON.stringify(during)).not.toContain('stack');

    await behind.restoreDatabase();
    expect((await me()).data).toEqual({ me: { id: userId } });
    const after = noted(log.lines.slice(before));
    expect(after.map((l) => l.msg)).toEqual([OUTAGE, BACK]);
    expect(after[1]).toMatchObject({ level: 40 });
    // Six requests, one failure each: a POST whose credential check fails is not checked again when
    // Yoga answers it after the direct path.
    expect(after[1]!.failures).toBe(6);
  }, 30_000);
});
