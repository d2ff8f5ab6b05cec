import { type AddressInfo, createServer } from 'node:net';

/** A port bound on HOST before the HTTP server exists, which that server then listens on. */
export interface PortClaim {
  port: number;
  /**
   * Node's `listen({ handle })`: the HTTP server takes over the bound socket itself. Binding the
   * port again after closing a probe would leave a moment in which another process could take it.
   */
  handOver(): { handle: object };
  /** Closes the socket unless it was handed over (a process that is built but never listens). */
  release(): Promise<void>;
}

/** Binds HOST on a port the system picks (PORT=0), so the URLs derived from the port can name it. */
export async function claimPort(host: string): Promise<PortClaim> {
  // Nothing serves a connection made before the hand-over (none should be: the port is not yet
  // announced), so it is closed rather than left hanging.
  const holder = createServer({ pauseOnConnect: true }, (socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    holder.once('error', reject);
    holder.listen({ host, port: 0 }, () => {
      holder.off('error', reject);
      resolve();
    });
  });
  let handedOver = false;
  return {
    port: (holder.address() as AddressInfo).port,
    handOver() {
      handedOver = true;
      // The documented form is `listen(server)`, "anything with an underlying _handle member";
      // Fastify passes its options object to listen, so the handle goes in it.
      return { handle: (holder as unknown as { _handle: object })._handle };
    },
    async release() {
      if (handedOver || !holder.listening) return;
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    },
  };
}
