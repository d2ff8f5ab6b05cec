import {
  Metadata,
  status,
  type sendUnaryData,
  type Server,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';

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

type Handler = (...args: never[]) => unknown;

function refusal(): ServiceError {
  return Object.assign(new Error(UNDECODABLE_MESSAGE), {
    code: status.INVALID_ARGUMENT,
    details: UNDECODABLE_MESSAGE,
    metadata: new Metadata(),
  });
}

/**
 * A `Server` that adds every service it is given with undecodable requests refused as
 * INVALID_ARGUMENT, for the services whose handlers come from libraries (health, reflection) and so
 * never see the pipeline. Handlers are wrapped once, at registration; each call pays one comparison.
 */
export function refusingUndecodable(server: Server): Server {
  return {
    addService(definition: ServiceDefinition, implementation: UntypedServiceImplementation) {
      const handlers: UntypedServiceImplementation = { ...implementation };
      for (const [name, method] of Object.entries(definition)) {
        // grpc-js finds a handler under the method's name or its original (lower camel) name.
        const key = name in implementation ? name : method.originalName;
        const handler = key === undefined ? undefined : (implementation[key] as Handler | undefined);
        if (key !== undefined && handler) {
          handlers[key] = refuseIn(handler, method.requestStream, method.responseStream) as never;
        }
      }
      server.addService(markUndecodable(definition), handlers);
    },
  } as Pick<Server, 'addService'> as Server;
}

function refuseIn(handler: Handler, requestStream: boolean, responseStream: boolean): Handler {
  const h = handler as unknown as (call: ServerCallish, callback?: sendUnaryData<unknown>) => void;
  if (!requestStream) {
    return ((call: ServerCallish, callback?: sendUnaryData<unknown>) => {
      if (call.request !== UNDECODABLE) return h(call, callback);
      if (responseStream) call.emit('error', refusal());
      else callback?.(refusal(), null);
    }) as Handler;
  }
  // A client stream: every message arrives through 'data', so the listeners the library adds are
  // wrapped on this call; the first undecodable message ends the call.
  return ((call: ServerCallish, callback?: sendUnaryData<unknown>) => {
    const on = call.on.bind(call);
    let refused = false;
    call.on = (event: string | symbol, listener: (...args: unknown[]) => void) => {
      if (event !== 'data') return on(event, listener);
      return on('data', (message: unknown) => {
        if (message !== UNDECODABLE) return listener(message);
        if (refused) return;
        refused = true;
        if (responseStream) call.emit('error', refusal());
        else callback?.(refusal(), null);
      });
    };
    return h(call, callback);
  }) as Handler;
}

/** What the wrappers touch of grpc-js's server call objects. */
interface ServerCallish {
  request?: unknown;
  on(event: string | symbol, listener: (...args: unknown[]) => void): unknown;
  emit(event: string | symbol, ...args: unknown[]): boolean;
}
