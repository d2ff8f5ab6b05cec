import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DRAIN_LIMIT_MS, stopOnSignals } from '../../src/process/stop-signals.js';
import { memoryLog } from '../helpers/memory-log.js';

/**
 * The drain limit of `atrium serve` (src/process/stop-signals.ts): SIGTERM drains, a drain still
 * running at the limit ends the process with 1 whatever it holds, and so does a second signal. The
 * real process with a frozen WebSocket subscriber: test/integration/graphql/ws-drain-unresponsive.test.ts.
 */
const LIMIT_MS = 200;
/**
 * For a test about something else than the limit: one no stall of the test's process reaches. With
 * LIMIT_MS, a loaded machine that did not run the process for 200 ms (between the signals, say)
 * let the limit's exit(1) come first.
 */
const LIMIT_NOT_REACHED_MS = 10 * 60_000;
const msgs = (lines: Array<Record<string, unknown>>) => lines.map((l) => l.msg);

function setup(close: () => Promise<void>, limitMs = LIMIT_MS) {
  const { lines, logger } = memoryLog('info');
  const signals = new EventEmitter();
  const exits: number[] = [];
  let exited!: (code: number) => void;
  const exitCalled = new Promise<number>((resolve) => (exited = resolve));
  const result = stopOnSignals({
    close,
    logger,
    limitMs,
    signals,
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
  });
  return { lines, signals, exits, exitCalled, result };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const never = () => new Promise<void>(() => undefined);

describe('stopOnSignals', () => {
  it('keeps the documented 30 s limit', () => {
    expect(DRAIN_LIMIT_MS).toBe(30_000);
  });

  it('resolves 0 once the drain finishes, and exits nothing itself', async () => {
    const t = setup(async () => undefined);
    t.signals.emit('SIGTERM');
    expect(await t.result).toBe(0);
    expect(msgs(t.lines)).toEqual(['draining', 'stopped']);
    expect(t.exits).toEqual([]);
  });

  it('resolves 1 when the drain fails', async () => {
    const t = setup(async () => {
      throw new Error('boom');
    });
    t.signals.emit('SIGINT');
    expect(await t.result).toBe(1);
    expect(msgs(t.lines)).toEqual(['draining', 'error while stopping']);
  });

  it('calls exit(1) when the drain is still running at the limit, after logging why', async () => {
    const t = setup(never);
    const started = Date.now();
    t.signals.emit('SIGTERM');
    expect(await t.exitCalled).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(LIMIT_MS - 20);
    expect(t.exits).toEqual([1]);
    expect(msgs(t.lines)).toEqual(['draining', 'drain took too long; exiting']);
  });

  it('calls exit with the drain status when something still holds the process at the limit', async () => {
    const t = setup(async () => undefined);
    t.signals.emit('SIGTERM');
    expect(await t.result).toBe(0);
    expect(await t.exitCalled).toBe(0);
    expect(msgs(t.lines)).toContain('drain ended but something still holds the process open; exiting');
  });

  it('calls exit(1) at once on the same signal again, and only once', async () => {
    const t = setup(never);
    t.signals.emit('SIGINT');
    await sleep(10);
    t.signals.emit('SIGINT');
    expect(await t.exitCalled).toBe(1);
    await sleep(LIMIT_MS + 50);
    expect(t.exits).toEqual([1]);
    expect(msgs(t.lines)).toEqual(['draining', 'second signal while draining; exiting now']);
  });

  it('keeps draining on SIGTERM after SIGINT (Ctrl-C on atrium cluster: the terminal, then the cluster)', async () => {
    let finish!: () => void;
    const t = setup(() => new Promise<void>((resolve) => (finish = resolve)), LIMIT_NOT_REACHED_MS);
    t.signals.emit('SIGINT');
    await sleep(10);
    t.signals.emit('SIGTERM');
    await sleep(10);
    expect(t.exits).toEqual([]);
    finish();
    expect(await t.result).toBe(0);
    expect(msgs(t.lines)).toEqual(['draining', 'already draining', 'stopped']);
  });
});
