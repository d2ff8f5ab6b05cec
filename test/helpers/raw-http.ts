import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection after answering. */
  closed: boolean;
}

/**
 * Sends bytes exactly as given over a TCP socket and reads one answer: for requests no HTTP client
 * will send (a bad method, a NUL in a header, both Content-Length and Transfer-Encoding).
 */
export function rawRequest(baseUrl: string, bytes: string | Buffer, timeoutMs = 5_000): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    let closed = false;
    // A server that keeps the connection open is cut off here; `closed` then stays false.
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    const finish = () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no complete answer: ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({
        status: Number(statusLine!.split(' ')[1]),
        headers,
        body: Buffer.from(text.slice(split + 4), 'latin1').toString('utf8'),
        closed,
      });
    };
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('end', () => {
      closed = true;
    });
    socket.on('close', finish);
    socket.on('error', () => undefined);
    socket.write(bytes);
  });
}
