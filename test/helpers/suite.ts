import { afterAll, beforeAll } from 'vitest';

/**
 * Something a describe block's tests share: made by `start` in a beforeAll registered here (so
 * before the block's own hooks that come after the call) and ended by `stop` in an afterAll.
 *
 * The object returned stands for it and can be kept in a `const` while tests are collected; reading
 * a field from it before the beforeAll ran (while collecting, say) throws instead of giving
 * `undefined`. Methods read from it are bound to the fixture itself, so a class with `#private`
 * fields works through it (called on the proxy, `this.#field` would throw).
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
    get: (_target, key) => {
      const fixture = started();
      const value: unknown = Reflect.get(fixture, key);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(fixture) : value;
    },
    has: (_target, key) => Reflect.has(started(), key),
  });
}
