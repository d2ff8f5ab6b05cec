import type { Server, ServerWritableStream, UntypedServiceImplementation } from '@grpc/grpc-js';
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';

/**
 * grpc.health.v1.Health (Check, Watch; no credentials) with a status per service name: "" for the
 * whole server and one per served service. Watch streams are tracked so a drain can send them
 * NOT_SERVING and then end them cleanly instead of holding the shutdown open.
 */
export class Health {
  private readonly impl: HealthImplementation;
  private readonly watches = new Set<ServerWritableStream<unknown, unknown>>();

  constructor(private readonly services: readonly string[]) {
    this.impl = new HealthImplementation(
      Object.fromEntries(['', ...services].map((s) => [s, 'NOT_SERVING'])),
    );
  }

  addToServer(server: Server): void {
    const watches = this.watches;
    this.impl.addToServer({
      addService(definition, implementation: UntypedServiceImplementation) {
        const watch = implementation.watch as (call: ServerWritableStream<unknown, unknown>) => void;
        server.addService(definition, {
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

  set(status: ServingStatus): void {
    for (const s of ['', ...this.services]) this.impl.setStatus(s, status);
  }

  /** Ends every Watch with status OK, after the NOT_SERVING update that `set` already queued. */
  endWatches(): void {
    for (const call of this.watches) if (!call.cancelled && !call.writableEnded) call.end();
    this.watches.clear();
  }
}
