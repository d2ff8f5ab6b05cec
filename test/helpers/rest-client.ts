/** One answer of a listening server, read whole. */
export interface RestAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON; undefined when it is empty or not JSON. */
  body: Record<string, unknown> | undefined;
}

export interface CallOptions {
  headers?: Record<string, string>;
  /** Sent as JSON (`Content-Type: application/json`). */
  json?: unknown;
  /** Sent exactly as given, with whatever Content-Type `headers` names. */
  raw?: string;
}

/**
 * A request to a listening Atrium over a real socket (Node's fetch), as a client would send it;
 * for the REST tests that must see exactly what goes over the wire.
 */
export async function call(
  base: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<RestAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  let payload: string | undefined = options.raw;
  if (options.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    payload = JSON.stringify(options.json);
  }
  const res = await fetch(`${base}${path}`, { method, headers, body: payload });
  const text = await res.text();
  let body: Record<string, unknown> | undefined;
  try {
    body = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}
