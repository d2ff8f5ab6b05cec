import type { ServerRole } from '../compose.js';

/** How many processes of each role a deployment runs. */
export type LayoutCounts = Record<ServerRole, number>;

/** The reference layout of docs/deployment.md: 2 api, 1 auth, 1 grpc, 2 worker. */
export const DEFAULT_LAYOUT: LayoutCounts = { api: 2, auth: 1, grpc: 1, worker: 2 };

/** One `atrium serve --role ...` process and where it listens. */
export interface ProcessSpec {
  /** `api-1`, `worker-2`, ...: stable across restarts, used in logs and by restart(). */
  name: string;
  role: ServerRole;
  /** HTTP: the role's routes (api, auth) and always /healthz, /readyz, /metrics. */
  port: number;
  /** gRPC listener; only the grpc role opens it. */
  grpcPort: number;
}

const ORDER: readonly ServerRole[] = ['api', 'auth', 'grpc', 'worker'];

/**
 * Gives every process its ports: HTTP ports are `basePort`, `basePort + 1`, ... in the order
 * api, auth, grpc, worker; gRPC ports start at `basePort + 100`. `ports` (tests) overrides both:
 * HTTP ports first, then one gRPC port per grpc process.
 */
export function planLayout(counts: LayoutCounts, basePort: number, ports?: number[]): ProcessSpec[] {
  const specs: ProcessSpec[] = [];
  let http = 0;
  let grpc = 0;
  const total = ORDER.reduce((n, r) => n + counts[r], 0);
  for (const role of ORDER) {
    for (let i = 1; i <= counts[role]; i++) {
      const port = ports ? ports[http] : basePort + http;
      const grpcPort = role === 'grpc' ? (ports ? ports[total + grpc] : basePort + 100 + grpc) : 0;
      if (port === undefined || grpcPort === undefined) throw new Error('not enough ports for the layout');
      if (role === 'grpc') grpc++;
      http++;
      specs.push({ name: `${role}-${i}`, role, port, grpcPort });
    }
  }
  return specs;
}

/** How many ports planLayout needs when they are given explicitly. */
export function portsNeeded(counts: LayoutCounts): number {
  return ORDER.reduce((n, r) => n + counts[r], 0) + counts.grpc;
}

/** Parses `--api 2 --worker 1` style counts over the defaults. */
export function layoutFrom(values: Partial<Record<ServerRole, string | undefined>>): LayoutCounts {
  const counts = { ...DEFAULT_LAYOUT };
  for (const role of ORDER) {
    const raw = values[role];
    if (raw === undefined) continue;
    if (!/^\d+$/.test(raw) || Number(raw) > 16)
      throw new RangeError(`--${role} takes 0 to 16 (got "${raw}")`);
    counts[role] = Number(raw);
  }
  if (counts.api === 0 && counts.auth === 0)
    throw new RangeError('the layout needs at least one api or auth process');
  return counts;
}
