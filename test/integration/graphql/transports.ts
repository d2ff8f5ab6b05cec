import { createClient as createSseClient, NetworkError } from 'graphql-sse';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import WebSocket from 'ws';

/**
 * One operation over any of the four transports, through the real protocol clients: fetch for POST
 * and GET, graphql-ws over a WebSocket, graphql-sse over server-sent events. Every answer comes back
 * in one shape so a rule can be checked the same way on each transport.
 */
export type TransportName = 'POST' | 'GET' | 'WS' | 'SSE';
export const TRANSPORTS: TransportName[] = ['POST', 'GET', 'WS', 'SSE'];

export interface Operation {
  query?: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  extensions?: Record<string, unknown>;
}

export interface Answer {
  /** HTTP status for POST, GET and a refused SSE request; 101 (upgraded) for WebSocket. */
  status: number;
  data?: unknown;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
  /** WebSocket close code when the server closed the connection. */
  closeCode?: number;
}

export type Credentials = { 'x-api-key'?: string; authorization?: string };

export const codesOf = (a: Answer) => (a.errors ?? []).map((e) => e.extensions?.code);

/** Base URL such as http://127.0.0.1:1234 (no path). */
export async function runOver(
  transport: TransportName,
  base: string,
  op: Operation,
  credentials: Credentials = {},
): Promise<Answer> {
  switch (transport) {
    case 'POST': {
      const res = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...credentials },
        body: JSON.stringify(op),
      });
      return { status: res.status, ...((await res.json()) as object) };
    }
    case 'GET': {
      const url = new URL(`${base}/graphql`);
      if (op.query !== undefined) url.searchParams.set('query', op.query);
      if (op.variables) url.searchParams.set('variables', JSON.stringify(op.variables));
      if (op.operationName) url.searchParams.set('operationName', op.operationName);
      if (op.extensions) url.searchParams.set('extensions', JSON.stringify(op.extensions));
      const res = await fetch(url, { headers: { accept: 'application/json', ...credentials } });
      const text = await res.text();
      return { status: res.status, ...(text ? (JSON.parse(text) as object) : {}) };
    }
    // graphql-ws and graphql-sse require `query` to be a string: a hash-only request sends "".
    case 'WS':
      return firstOverWs(base, { ...op, query: op.query ?? '' }, credentials);
    case 'SSE':
      return firstOverSse(base, { ...op, query: op.query ?? '' }, credentials);
  }
}

export function wsClient(
  base: string,
  credentials: Credentials = {},
  onClose?: (code: number) => void,
): WsClient {
  return createWsClient({
    url: `${base.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: credentials,
    retryAttempts: 0,
    lazy: true,
    on: onClose ? { closed: (e) => onClose((e as { code: number }).code) } : {},
  });
}

async function firstOverWs(base: string, op: Operation, credentials: Credentials): Promise<Answer> {
  let closeCode: number | undefined;
  const client = wsClient(base, credentials, (code) => (closeCode = code));
  try {
    return await new Promise<Answer>((resolve) => {
      const results: Answer[] = [];
      client.subscribe(op as never, {
        next: (value) => results.push({ status: 101, ...(value as object) }),
        error: (err) => {
          if (Array.isArray(err)) resolve({ status: 101, errors: err as Answer['errors'] });
          else resolve({ status: 101, closeCode: closeCode ?? (err as { code?: number }).code, errors: [] });
        },
        complete: () => resolve(results[0] ?? { status: 101 }),
      });
    });
  } finally {
    await client.dispose();
  }
}

async function firstOverSse(base: string, op: Operation, credentials: Credentials): Promise<Answer> {
  const client = createSseClient({
    url: `${base}/graphql/stream`,
    headers: credentials as Record<string, string>,
    retryAttempts: 0,
  });
  try {
    return await new Promise<Answer>((resolve) => {
      const results: Answer[] = [];
      client.subscribe(op as never, {
        next: (value) => results.push({ status: 200, ...(value as object) }),
        error: async (err) => {
          if (err instanceof NetworkError && err.response) {
            const response = err.response as Response;
            const text = await response.text().catch(() => '');
            resolve({ status: response.status, ...(text ? (JSON.parse(text) as object) : {}) });
          } else resolve({ status: 0, errors: [{ message: String(err) }] });
        },
        complete: () => resolve(results[0] ?? { status: 200 }),
      });
    });
  } finally {
    client.dispose();
  }
}

/**
 * A raw `ws` socket, for what graphql-ws's client will not do (leave pings unanswered, stop reading),
 * brought to one live operation: open, `connection_init` with the API key, then `subscribe` (id "1")
 * once the server acknowledges.
 */
export async function rawSubscription(ws: WebSocket, key: string, operation: Operation): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () => resolve());
  });
  ws.send(JSON.stringify({ type: 'connection_init', payload: { 'x-api-key': key } }));
  await new Promise<void>((resolve) => {
    const acknowledged = (data: WebSocket.RawData) => {
      if ((JSON.parse(String(data)) as { type: string }).type !== 'connection_ack') return;
      ws.off('message', acknowledged);
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: operation }));
      resolve();
    };
    ws.on('message', acknowledged);
  });
}
