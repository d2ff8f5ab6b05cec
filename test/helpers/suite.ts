import { afterAll, beforeAll } from 'vitest';

/**
 * Something a describe block's tests share: made by `start` in a beforeAll registered here (so
 * before the block's own hooks that come after the call) and ended by `stop` in an afterAll.
 *
 * The object returned stands for it and can be kept in a `const` while tests are collected; reading
 * a field from it before the beforeAll ran (while collecting, say) throws instead of giving
 * `undefined`.
 */
export function forSuite<T extends object>(
  start: () => Promise<T>,
  stop?: (value: T) => Promise<unknown>,
): T {
  let value: T | undefined;
  beforeAll(async () => {
    value = await start();
  });
  afterAll(async () => {
    if (value !== undefined) await stop?.(value);
  });
  const started = (): T => {
    if (value === undefined)
      throw new Error('forSuite: read the fixture in hooks and tests, once it has started');
    return value;
  };
  return new Proxy({} as T, {
    get: (_target, key) => Reflect.get(started(), key),
    has: (_target, key) => Reflect.has(started(), key),
  });
}
