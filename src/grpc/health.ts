import type { Server, ServerWritableStream, UntypedServiceImplementation } from '@grpc/grpc-js';
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';
import { refusingUndecodable } from './undecodable.js';

/**
 * grpc.health.v1.Health (Check, Watch; no credentials) with a status per service name: "" for the
 * whole server and one per served service. Watch streams are tracked so a drain can send them
 * NOT_SERVING and then end them cleanly instead of holding the shutdown open.
 *
 * The status follows readiness (`follow`): a periodic probe, not a check per call, so Check and
 * Watch answer from memory however often a balancer asks, and Watch streams hear each change as
 * the probe sees it. A drain's NOT_SERVING is final.
 */
export class Health {
  private readonly impl: HealthImplementation;
  private readonly watches = new Set<ServerWritableStream<unknown, unknown>>();
  private status: ServingStatus = 'NOT_SERVING';
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private following = false;

  constructor(private readonly services: readonly string[]) {
    this.impl = new HealthImplementation(
      Object.fromEntries(['', ...services].map((s) => [s, 'NOT_SERVING'])),
    );
  }

  addToServer(server: Server): void {
    const watches = this.watches;
    const target = refusingUndecodable(server);
    this.impl.addToServer({
      addService(definition, implementation: UntypedServiceImplementation) {
        const watch = implementation.watch as (call: ServerWritableStream<unknown, unknown>) => void;
        target.addService(definition, {
          ...implementation,
          watch(call: ServerWritableStream<unknown, unknown>) {
            watches.add(call);
            const forget = () => watches.delete(call);
            call.on('cancelled', forget);
            call.on('finish', forget);
            watch(call);
          },
        });
      },
    } as Pick<Server, 'addService'> as Server);
  }

  /**
   * Sets every service's status. Only a change reaches the watchers (grpc-health-check writes on
   * every set, and a probe sets the same status again and again); nothing changes it after `drain`.
   */
  set(status: ServingStatus): void {
    if (this.draining || status === this.status) return;
    this.status = status;
    for (const s of ['', ...this.services]) this.impl.setStatus(s, status);
  }

  /**
   * Asks `ready` now and then every `intervalMs` (after each answer, so slow probes never pile up)
   * until `drain`, and sets the status from each answer. Resolves after the first one, so a server
   * reports SERVING only once its dependencies have answered. `ready` must not throw.
   */
  follow(ready: () => Promise<boolean>, intervalMs: number): Promise<void> {
    if (this.following || this.draining) return Promise.resolve();
    this.following = true;
    const probe = async () => {
      const ok = await ready();
      // A probe that was in flight when the drain began must not undo its NOT_SERVING: `set`
      // refuses, and no further probe is scheduled.
      this.set(ok ? 'SERVING' : 'NOT_SERVING');
      if (this.draining) return;
      this.timer = setTimeout(() => void probe(), intervalMs);
      // Health must not keep a process alive that has nothing else to do.
      this.timer.unref();
    };
    return probe();
  }

  /** NOT_SERVING for good: the drain has begun; a dependency's recovery no longer matters. */
  drain(): void {
    this.set('NOT_SERVING');
    this.draining = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Ends every Watch with status OK, after the NOT_SERVING update that `drain` already queued. */
  endWatches(): void {
    for (const call of this.watches) if (!call.cancelled && !call.writableEnded) call.end();
    this.watches.clear();
  }
}
