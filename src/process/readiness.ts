/**
 * Readiness: whether this process should be sent work. One rule for every surface that reports it:
 * HTTP `/readyz` (src/http/plugins/health.ts) and gRPC `grpc.health.v1.Health` (src/grpc/health.ts)
 * both ask `checkReadiness`, so a balancer reading either one sees the same answer.
 */

export type ReadinessRole = 'api' | 'auth' | 'grpc' | 'worker';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
  /** The process roles that depend on it; absent: every role does (the database). */
  roles?: readonly ReadinessRole[];
}

export interface Readiness {
  ready: boolean;
  /** `ok` or `unavailable` per check, and `process: draining` during a drain. */
  checks: Record<string, string>;
}

/**
 * A dependency that does not answer within this long counts as unavailable: a probe must answer
 * sooner than the balancer's own timeout, and a pool starved by a hung server must not hold it.
 */
export const READINESS_TIMEOUT_MS = 2000;

/** The checks that matter to a process (or a surface) serving `roles`. */
export function checksFor(
  checks: readonly ReadinessCheck[],
  roles: readonly ReadinessRole[],
): ReadinessCheck[] {
  return checks.filter((c) => !c.roles || c.roles.some((r) => roles.includes(r)));
}

/** Ready: not draining, and every dependency answers. Every check runs, so the answer names each. */
export async function checkReadiness(
  checks: readonly ReadinessCheck[],
  isDraining: () => boolean,
): Promise<Readiness> {
  const results: Record<string, string> = {};
  let ready = true;
  await Promise.all(
    checks.map(async (c) => {
      try {
        await withTimeout(c.check(), READINESS_TIMEOUT_MS);
        results[c.name] = 'ok';
      } catch {
        results[c.name] = 'unavailable';
        ready = false;
      }
    }),
  );
  // Asked after the checks: a drain that began while they ran still counts.
  if (isDraining()) {
    results.process = 'draining';
    ready = false;
  }
  return { ready, checks: results };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}
