import autocannon from 'autocannon';

/** One load figure: requests per second (average), latency percentiles and what went wrong. */
export interface Figure {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** Requests answered in the measured run. */
  requests: number;
}

export interface MeasureOptions {
  seconds: number;
  /** Unmeasured load first, so the JIT has compiled the path before the figure is taken. */
  warmupSeconds: number;
  connections: number;
}

/** Runs autocannon with `opts` (a warm-up, then the measured run) and returns the figure. */
export async function measure(name: string, opts: autocannon.Options, how: MeasureOptions): Promise<Figure> {
  const base = { connections: how.connections, ...opts };
  if (how.warmupSeconds > 0) await autocannon({ ...base, duration: how.warmupSeconds });
  const result = await autocannon({ ...base, duration: how.seconds });
  return {
    name,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    requests: result.requests.total,
  };
}
