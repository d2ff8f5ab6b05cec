import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../src/domain/clock.js';
import { SigningKeys } from '../../../src/oauth/keys.js';
import { openStore, type Store } from '../../../src/store/store.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';

const MINUTE = 60_000;
const kids = (set: { keys: { kid: string }[] }) => set.keys.map((k) => k.kid).sort();

/**
 * The signing-key cache (60 s) and the unknown-kid re-read throttle (5 s) age on a monotonic clock.
 * Until 2026-11-29 they aged on the wall clock, so after it stepped backwards (an NTP step, a
 * restored VM) an instance kept its key set for as long as the step: a key rotated by another
 * instance stayed out of its JWKS for minutes. Two instances on one real store; the test steps the
 * process's wall clock (Date) back and moves it and performance.now() forward with fake timers,
 * nothing else is faked (the database runs on real timers).
 */
describe('signing-key cache after the wall clock steps back', () => {
  let database: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    database = await freshDatabase();
    store = openStore(database.url);
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * The first key was made an hour ago; instance `a` has read the keys now; then the wall clock
   * steps back five minutes (the first key stays published: it is older than that).
   */
  async function instancesAfterStepBack(beforeStep?: (a: SigningKeys) => Promise<void>) {
    await store.db.deleteFrom('signing_keys').execute();
    await store.db.deleteFrom('settings').where('key', '=', 'oauth_first_signing_key').execute();
    const now = Date.now();
    vi.useFakeTimers({ toFake: ['Date', 'performance'], now: now - 60 * MINUTE });
    const a = new SigningKeys(store, systemClock, 3600);
    const b = new SigningKeys(store, systemClock, 3600);
    await b.signingKey();
    vi.setSystemTime(now);
    const first = kids(await a.jwks());
    expect(first).toHaveLength(1);
    await beforeStep?.(a);
    vi.setSystemTime(now - 5 * MINUTE);
    return { a, b, first };
  }

  it('a key rotated by another instance is in the JWKS once the cache is a minute old', async () => {
    const { a, b, first } = await instancesAfterStepBack();
    const rotated = await b.rotate();
    // Within the cache's lifetime the cached set is served, as it should be.
    vi.advanceTimersByTime(30_000);
    expect(kids(await a.jwks())).toEqual(first);
    vi.advanceTimersByTime(31_000);
    expect(kids(await a.jwks())).toEqual([...first, rotated.kid].sort());
  });

  it('an unknown kid re-reads the keys once the throttle interval has passed', async () => {
    const { a, b } = await instancesAfterStepBack(async (a) => {
      expect(await a.verificationKey('kid_unknown')).toBeUndefined();
    });
    const rotated = await b.rotate();
    vi.advanceTimersByTime(6_000);
    expect(await a.verificationKey(rotated.kid)).toBeDefined();
  });
});
