import { describe, expect, it } from 'vitest';
import { RESTART_BACKOFF_MS, restartDelayMs } from '../../src/cluster/cluster.js';

describe('atrium cluster restart delay', () => {
  it('waits 1 s after a first exit, doubling with each exit in a row, at most 30 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map((n) => restartDelayMs(n))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
    expect(RESTART_BACKOFF_MS).toEqual({ initial: 1_000, max: 30_000 });
  });

  it('follows the backoff a cluster is given (options.restart, small in the supervisor test)', () => {
    expect([1, 2, 3, 4].map((n) => restartDelayMs(n, { initial: 300, max: 1_000 }))).toEqual([
      300, 600, 1_000, 1_000,
    ]);
  });
});
