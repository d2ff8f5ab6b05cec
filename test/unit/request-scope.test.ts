import { executionAsyncResource } from 'node:async_hooks';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  RequestAbandoned,
  RequestScope,
  currentRequestScope,
  detachedFromRequest,
  endRequestScope,
  enterRequestScope,
  runWithSignal,
} from '../../src/domain/request-scope.js';

/** The scope seen after an await, a timer and a nested promise chain: where core work reads it. */
async function scopeAfterHops(): Promise<(RequestScope | undefined)[]> {
  const seen: (RequestScope | undefined)[] = [];
  await tick();
  seen.push(currentRequestScope());
  await new Promise<void>((resolve) => setTimeout(resolve, 1));
  seen.push(currentRequestScope());
  seen.push(await Promise.resolve().then(() => currentRequestScope()));
  return seen;
}

/**
 * Whether promises are tracked: with AsyncLocalStorage enabled, Node runs promise hooks and a
 * promise reaction runs with its promise as the current async resource; without, it does not.
 */
const promisesTracked = (): Promise<boolean> =>
  Promise.resolve().then(() => executionAsyncResource() instanceof Promise);

// The order matters: a scope never ended keeps the storage enabled for the rest of the process, so
// the test that leaves one open comes last.
describe('request scopes (AsyncLocalStorage enabled only while a scope can be current)', () => {
  it('a scope is current across awaits and timers, and the storage is off once it ends', async () => {
    expect(await promisesTracked()).toBe(false);
    const signal = new AbortController().signal;
    const seen = await runWithSignal(signal, async () => {
      expect(await promisesTracked()).toBe(true);
      return [currentRequestScope(), ...(await scopeAfterHops())];
    });
    expect(seen).toHaveLength(4);
    for (const scope of seen) expect(scope?.signal).toBe(signal);
    expect(await promisesTracked()).toBe(false);
    expect(currentRequestScope()).toBeUndefined();
  });

  it('a scope entered after the storage was turned off is tracked again', async () => {
    for (let round = 0; round < 3; round++) {
      const signal = new AbortController().signal;
      const seen = await runWithSignal(signal, scopeAfterHops);
      for (const scope of seen) expect(scope?.signal).toBe(signal);
      expect(await promisesTracked()).toBe(false);
    }
  });

  it('a scope that ends while another is open leaves the other one intact', async () => {
    const first = new AbortController().signal;
    const second = new AbortController().signal;
    let releaseSecond!: () => void;
    const secondMayGoOn = new Promise<void>((resolve) => (releaseSecond = resolve));
    const secondRun = runWithSignal(second, async () => {
      const before = currentRequestScope();
      await secondMayGoOn;
      return [before, currentRequestScope(), ...(await scopeAfterHops())];
    });
    // The first scope starts and ends while the second waits.
    const firstSeen = await runWithSignal(first, scopeAfterHops);
    for (const scope of firstSeen) expect(scope?.signal).toBe(first);
    expect(await promisesTracked()).toBe(true);
    releaseSecond();
    const secondSeen = await secondRun;
    expect(secondSeen).toHaveLength(5);
    for (const scope of secondSeen) expect(scope?.signal).toBe(second);
    expect(await promisesTracked()).toBe(false);
  });

  it('a scope that fails ends too', async () => {
    const failing = runWithSignal(new AbortController().signal, async () => {
      await tick();
      throw new Error('handler failed');
    });
    await expect(failing).rejects.toThrow('handler failed');
    expect(await promisesTracked()).toBe(false);
  });

  it('detached work inside an open scope runs outside it, and the scope goes on', async () => {
    const signal = new AbortController().signal;
    const seen = await runWithSignal(signal, async () => {
      const detached = await detachedFromRequest(async () => {
        await tick();
        return currentRequestScope();
      });
      return { detached, after: await scopeAfterHops() };
    });
    expect(seen.detached).toBeUndefined();
    for (const scope of seen.after) expect(scope?.signal).toBe(signal);
    expect(await promisesTracked()).toBe(false);
  });

  it('a scope entered after it ended runs its work outside it (a request answered already)', async () => {
    const scope = new RequestScope(new AbortController().signal);
    endRequestScope(scope);
    const seen = await enterRequestScope(scope, scopeAfterHops);
    for (const s of seen) expect(s).toBeUndefined();
    expect(await promisesTracked()).toBe(false);
  });

  it("a scope that is never ended (an abandoned request's) keeps the storage on from then on", async () => {
    const scope = new RequestScope(new AbortController().signal);
    const seen = await enterRequestScope(scope, scopeAfterHops);
    for (const s of seen) expect(s).toBe(scope);
    await runWithSignal(new AbortController().signal, scopeAfterHops);
    expect(await promisesTracked()).toBe(true);
  });
});

describe('a request scope with a deadline', () => {
  // No timer is involved: the clock is read at each check, so a deadline already behind us refuses
  // the very first statement even if nothing has aborted the signal (synchronous SQLite work).
  it('refuses once the clock has reached the deadline, though the signal is not aborted', () => {
    const signal = new AbortController().signal;
    expect(() => new RequestScope(signal, Date.now() - 1).throwIfAbandoned()).toThrow(RequestAbandoned);
    expect(() => new RequestScope(signal, Date.now() - 1).beforeCommit()).toThrow(RequestAbandoned);
    expect(() => new RequestScope(signal, Date.now() + 60_000).throwIfAbandoned()).not.toThrow();
    expect(() => new RequestScope(signal).throwIfAbandoned()).not.toThrow();
  });
});
