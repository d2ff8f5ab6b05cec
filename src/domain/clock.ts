/** Time source for the core; tests pass a controllable one instead of patching Date. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export const iso = (d: Date): string => d.toISOString();
export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
