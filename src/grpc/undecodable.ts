import type { ServiceDefinition } from '@grpc/grpc-js';

/**
 * What a request message that cannot be decoded becomes. grpc-js answers a throwing
 * `requestDeserialize` itself, with INTERNAL "Error deserializing request" and without calling the
 * handler: no request id, no access line, no metrics, and a server fault for what is the client's
 * own bad bytes. So the decoder returns this instead, and the call pipeline (call.ts) refuses the
 * call with INVALID_ARGUMENT before any authentication work, as it refuses any other call.
 */
export const UNDECODABLE: object = Object.freeze({ undecodable: true });

/** The message a refused undecodable request gets. */
export const UNDECODABLE_MESSAGE = 'The request message could not be decoded.';

/**
 * The service definition with each method's request decoder answering UNDECODABLE rather than
 * throwing. The generated code (gen/, never edited by hand) stays as buf writes it. On the hot path
 * this adds one call and a try that never catches.
 */
export function markUndecodable<D extends ServiceDefinition>(definition: D): D {
  const wrapped = Object.entries(definition).map(([name, method]) => {
    const decode = method.requestDeserialize;
    const requestDeserialize = (bytes: Buffer): unknown => {
      try {
        return decode(bytes);
      } catch {
        return UNDECODABLE;
      }
    };
    return [name, { ...method, requestDeserialize }] as const;
  });
  return Object.fromEntries(wrapped) as D;
}
