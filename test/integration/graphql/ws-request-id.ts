import type { IncomingHttpHeaders } from 'node:http';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import type { Answer, Credentials, Operation } from './transports.js';

export interface WsExchange {
  answer: Answer;
  /** The headers of the server's 101 Switching Protocols. */
  upgrade: IncomingHttpHeaders | undefined;
  closeCode?: number | undefined;
}

/**
 * One operation over graphql-ws on a connection whose upgrade request carries `X-Request-Id:
 * requestId` (absent when undefined), as a server-side client (ws) can send it; what the 101 said.
 */
export async function overWsWithRequestId(
  base: string,
  requestId: string | undefined,
  op: Operation,
  credentials: Credentials = {},
): Promise<WsExchange> {
  let upgrade: IncomingHttpHeaders | undefined;
  let closeCode: number | undefined;
  const headers = requestId === undefined ? {} : { 'x-request-id': requestId };
  class WithRequestId extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers });
      this.once('upgrade', (res) => (upgrade = res.headers));
    }
  }
  const client = createClient({
    url: `${base.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WithRequestId,
    connectionParams: credentials,
    retryAttempts: 0,
    lazy: true,
    on: { closed: (e) => (closeCode = (e as { code: number }).code) },
  });
  try {
    const answer = await new Promise<Answer>((resolve) => {
      let first: Answer | undefined;
      client.subscribe({ ...op, query: op.query ?? '' } as never, {
        next: (value) => (first ??= { status: 101, ...(value as object) }),
        error: (err) =>
          resolve(
            Array.isArray(err)
              ? { status: 101, errors: err as Answer['errors'] }
              : { status: 101, closeCode: closeCode ?? (err as { code?: number }).code, errors: [] },
          ),
        complete: () => resolve(first ?? { status: 101 }),
      });
    });
    return { answer, upgrade, closeCode: closeCode ?? answer.closeCode };
  } finally {
    await client.dispose();
  }
}
