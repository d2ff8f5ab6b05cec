/**
 * How long a drain counts a connection that has not yet carried a request (HTTP: no complete request
 * head; gRPC: not even the HTTP/2 preface) as open while it waits for a balancer to close its
 * connections (SHUTDOWN_DELAY_MS, step 2 of docs/deployment.md's drain).
 *
 * A balancer writes its request as soon as it has connected, so a connection accepted just before the
 * listener closed may hold a request this process has not read yet: closed then, the request would be
 * lost with a reset (nginx never resends a POST or a gRPC call). A connection silent for longer is not
 * a balancer's (a port scanner, a TCP health check, a browser's preconnect, a client trickling its
 * headers) and never ends by itself; counted, it held the step for its full length. The drain's last
 * step closes such connections anyway.
 */
export const FIRST_REQUEST_GRACE_MS = 1_000;
