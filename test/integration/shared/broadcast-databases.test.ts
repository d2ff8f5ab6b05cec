import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../../src/shared/factory.js';
import { TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { until } from '../../helpers/wait.js';

/**
 * Two deployments sharing one Redis server under different database numbers (REDIS_URL …/7 and
 * …/8) keep their keys apart; their broadcasts must stay apart too, although Redis pub/sub
 * ignores the database. Found by an outside walk: a comment added on one deployment reached the
 * other's subscribers and catch-up logic.
 */
describe('the Redis broadcast of one database is not heard in another', () => {
  const connections: Redis[] = [];
  const states: SharedState[] = [];
  // One key prefix for all three, as two deployments of the same build would have.
  const prefix = uniquePrefix('bcdb');

  async function stateOn(db: number): Promise<SharedState> {
    const url = new URL(TEST_REDIS_URL);
    url.pathname = `/${db}`;
    const redis = new Redis(url.toString(), { maxRetriesPerRequest: 2 });
    connections.push(redis);
    await redis.ping();
    const state = createSharedState(redis, prefix);
    states.push(state);
    return state;
  }

  afterAll(async () => {
    await Promise.all(states.map((s) => s.broadcast.close()));
    for (const redis of connections) redis.disconnect();
  });

  it('delivers within the database and not across', async () => {
    const [a, sameDb, otherDb] = await Promise.all([stateOn(7), stateOn(7), stateOn(8)]);
    const heard = { sameDb: [] as unknown[], otherDb: [] as unknown[] };
    await sameDb.broadcast.subscribe('comment.added', (m) => heard.sameDb.push(m));
    await otherDb.broadcast.subscribe('comment.added', (m) => heard.otherDb.push(m));

    await a.broadcast.publish('comment.added', { id: 'first' });
    await until(() => heard.sameDb.length === 1, 'the same database hears it');
    // A message published after the first on the other database's side shows that side listens.
    await (await stateOn(8)).broadcast.publish('comment.added', { id: 'second' });
    await until(() => heard.otherDb.length >= 1, 'the other database hears its own');
    expect(heard.sameDb).toEqual([{ id: 'first' }]);
    expect(heard.otherDb).toEqual([{ id: 'second' }]);
  });
});
