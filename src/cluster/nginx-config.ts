import { bodyLimitBytesFrom } from '../config/schema.js';
import { REFUSED_BODY_DRAIN_BYTES } from '../http/refused-body.js';
import { errorLocations, errorMaps, errorPages, REQUEST_ID_VAR } from './nginx-errors.js';

/**
 * The nginx configuration in front of Atrium's roles, rendered from one function so that
 * `deploy/nginx/atrium.conf` (for a real host), the compose file's nginx and `atrium cluster` run
 * the same routing. Stock nginx only: round-robin upstreams with kept-alive HTTP/1.1 connections,
 * passive failure detection, retries of idempotent requests on the next instance, and instances
 * taken out of rotation by a file, without a reload (see OUT_OF_ROTATION_DIR).
 */
export interface NginxSite {
  /** `host:port` or a bare port for the HTTP listener (REST, GraphQL, token server). */
  httpListen: string;
  /** `host:port` or a bare port for the h2c gRPC listener; omitted without grpc processes. */
  grpcListen?: string;
  /** `host:port` of each process, by role. */
  api: string[];
  auth: string[];
  grpc: string[];
  /**
   * BODY_LIMIT_BYTES as the instances behind run with it (the HTTP body and gRPC message limit);
   * nginx's own limit is rendered above it (nginxBodyLimit), never set by hand.
   */
  bodyLimitBytes: number;
  /** Where the files that take an instance out of rotation live; OUT_OF_ROTATION_DIR by default. */
  outOfRotationDir?: string;
}

/**
 * While a file named after an instance's address (`127.0.0.1:4000`, `api-1:3000`) exists in this
 * directory, nginx sends that instance nothing new: each request picks an upstream without it (a
 * rolling restart's first step; one instance per role at a time). nginx checks on every request, so
 * creating or removing the file needs no reload. A reload is what this replaces: it makes nginx's
 * old workers close their idle client keep-alive connections at once, and a client writing its next
 * request on one at that moment gets a reset (measured: 2 client resets in 40 reloads under load,
 * none from the files; docs/deployment.md).
 */
export const OUT_OF_ROTATION_DIR = '/etc/nginx/atrium-out-of-rotation';

/**
 * nginx, never the instance, closes idle upstream connections, and quickly: an instance that closes
 * a kept-alive connection races nginx reusing it, and a POST already sent on it is lost (502, nginx
 * never resends one). Idle for 1 s, nginx closes it; a draining instance answers with
 * `Connection: close` for SHUTDOWN_DELAY_MS (2 s in the cluster, over this 1 s), so when its listener
 * and idle sockets close, nginx holds none of them. (Fastify keeps idle sockets 72 s.)
 */
export const UPSTREAM_KEEPALIVE_TIMEOUT_MS = 1000;
const KEEPALIVE = `    keepalive 32;
    keepalive_timeout ${UPSTREAM_KEEPALIVE_TIMEOUT_MS / 1000}s;`;

/**
 * How far the HTTP server's client_max_body_size sits above Atrium's BODY_LIMIT_BYTES. An instance
 * is the one to refuse a body over the limit (413 in the surface's shape); nginx only stops what no
 * instance should have to read at all. The same number as the instance's REFUSED_BODY_DRAIN_BYTES:
 * it reads every body nginx lets through to the end after its 413 (src/http/refused-body.ts), so
 * nginx, still sending it, never meets a closed connection (a 502 for its client).
 *
 * The gRPC server sets no limit (`client_max_body_size 0`): nginx can only count a call's whole
 * request body, the message plus 5 bytes of framing and every message of a client stream together
 * (server reflection's), while Atrium limits each message, refusing one over BODY_LIMIT_BYTES on
 * reading its length prefix (RESOURCE_EXHAUSTED with both sizes). A stream whose messages passed a
 * limit of nginx's in sum, each well under Atrium's, was cut after the instance had answered
 * headers, when nginx can only reset it: the client got INTERNAL ("Received RST_STREAM with code
 * 2"), no status of anyone's (measured with a reflection stream; a cluster test checks).
 */
export const BODY_LIMIT_HEADROOM_BYTES = REFUSED_BODY_DRAIN_BYTES;

/**
 * How long a client of the HTTP server may take to send its request head, and may pause between
 * two reads of its body, in seconds (client_header_timeout, client_body_timeout). nginx's default
 * of 60 s lets a client that stalls (or a slowloris) hold a connection and a buffer a minute per
 * request; 10 s is ample for a client that is sending at all. nginx reads a body whole before
 * passing it on, so an instance never waits on it. Past either, nginx closes the connection without
 * answering: it never sends a 408 (an error_page for one is never used; nginx-errors.ts has none).
 * Not set for gRPC, whose client streams may rightly pause longer between messages.
 */
export const CLIENT_TIMEOUT_S = 10;

/** nginx's client_max_body_size for instances whose BODY_LIMIT_BYTES is `bodyLimitBytes`. */
export const nginxBodyLimit = (bodyLimitBytes: number): number => bodyLimitBytes + BODY_LIMIT_HEADROOM_BYTES;

/**
 * A failed instance is skipped for 2 s (max_fails=1), then tried again; a rolling restart waits
 * that long after an instance is ready before stopping the next, so one is always in rotation.
 */
const server = (address: string) => `    server ${address} max_fails=1 fail_timeout=2s;`;

/**
 * The role's upstream and, with more than one instance, one without each instance (`<name>_out_<n>`,
 * n from 1): the variable `$<name>` names the one to use, chosen per request by `selector`.
 */
function upstreams(name: string, addresses: string[], keepalive = true): string {
  const block = (upstreamName: string, servers: string[]) =>
    `upstream ${upstreamName} {\n${servers.map(server).join('\n')}\n${keepalive ? `${KEEPALIVE}\n` : ''}}\n`;
  const blocks = [block(name, addresses)];
  if (addresses.length > 1)
    addresses.forEach((_, i) =>
      blocks.push(
        block(
          `${name}_out_${i + 1}`,
          addresses.filter((_a, j) => j !== i),
        ),
      ),
    );
  return blocks.join('');
}

/** Sets `$<name>` to the role's upstream, or to the one without an instance whose file exists. */
function selector(name: string, addresses: string[], dir: string): string {
  const lines = [`    set $${name} ${name};`];
  if (addresses.length > 1)
    addresses.forEach((a, i) =>
      lines.push(`    if (-f ${dir}/${a}) {\n        set $${name} ${name}_out_${i + 1};\n    }`),
    );
  return `${lines.join('\n')}\n`;
}

const PROXY_HEADERS = `        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_set_header X-Forwarded-Host $host;
        proxy_set_header X-Forwarded-Port $server_port;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Request-Id ${REQUEST_ID_VAR};`;

/**
 * Idempotent requests (GET, HEAD, PUT, DELETE, ...) that meet a refused or reset connection go to
 * the next instance. POST and PATCH are never resent once sent (nginx's default; `non_idempotent`
 * is deliberately absent): a client retries them with its Idempotency-Key. A 503 is passed through,
 * not retried: it is the application's answer (database unavailable, with Retry-After), and counting
 * it as a failure would take every instance out of rotation at once ("no live upstreams", 502).
 */
const RETRY = `        proxy_next_upstream error timeout;
        proxy_next_upstream_tries 3;
        proxy_next_upstream_timeout 10s;`;

function proxied(upstreamName: string | undefined, extra = ''): string {
  if (!upstreamName) return `        return 503;\n`;
  return `        proxy_pass http://$${upstreamName};
        proxy_http_version 1.1;
${PROXY_HEADERS}
${RETRY}
${extra}`;
}

export function renderNginxSite(site: NginxSite): string {
  const dir = site.outOfRotationDir ?? OUT_OF_ROTATION_DIR;
  const api = site.api.length > 0 ? 'atrium_api' : undefined;
  const auth = site.auth.length > 0 ? 'atrium_auth' : undefined;
  const grpc = site.grpc.length > 0 && site.grpcListen ? 'atrium_grpc' : undefined;
  const limit = site.bodyLimitBytes;
  const backstop = nginxBodyLimit(limit);
  const parts: string[] = [
    '# Generated by src/cluster/nginx-config.ts; `atrium cluster --print-nginx` prints it for any layout.\n',
  ];
  if (api) parts.push(upstreams(api, site.api));
  if (auth) parts.push(upstreams(auth, site.auth));
  // gRPC upstream connections are not kept alive: nginx (1.22) keeps reusing an HTTP/2 connection
  // that received GOAWAY during a call, so a draining grpc instance cannot make nginx let go of it,
  // and the final GOAWAY then races a call nginx is writing (502, never resent: every gRPC call is a
  // POST). One connection per call costs a local TCP and HTTP/2 handshake; a restart loses nothing.
  if (grpc) parts.push(upstreams(grpc, site.grpc, false));
  parts.push(errorMaps());
  parts.push(`# WebSocket upgrades pass "upgrade"; every other request sends no Connection header, which
# keeps the upstream connection alive.
map $http_upgrade $atrium_connection {
    default upgrade;
    ''      '';
}

server {
    listen ${site.httpListen};
    # Atrium refuses a body over BODY_LIMIT_BYTES (${limit}) itself, in the shape of the surface
    # asked. nginx's limit is only a backstop above it, BODY_LIMIT_BYTES + 1 MiB: change the two
    # together (src/cluster/nginx-config.ts, docs/deployment.md).
    client_max_body_size ${backstop};
    # A client stalled this long on its request head, or between two reads of its body, is dropped:
    # the connection closes without an answer (nginx sends no 408; src/cluster/nginx-config.ts).
    client_header_timeout ${CLIENT_TIMEOUT_S}s;
    client_body_timeout ${CLIENT_TIMEOUT_S}s;
    # An instance whose file exists in ${dir} gets nothing new (src/cluster/nginx-config.ts).
${api ? selector(api, site.api, dir) : ''}${auth ? selector(auth, site.auth, dir) : ''}    # After a client connection's last kept-alive request (keepalive_requests, 1000) nginx answers
    # "Connection: close" and closes. A client that has already written its next request would get a
    # reset, which can destroy the answer it has not read yet: read and discard instead, then close.
    lingering_close always;

    # What nginx answers itself (an instance down, a body over the limit, a request it cannot
    # parse) has the error shape of the surface asked: REST here, the others in their locations.
${errorPages('rest', '    ')}
    # The token server: authorization pages, token, introspection, discovery and keys.
    location /oauth/ {
${proxied(auth, '        proxy_set_header Connection "";\n')}${errorPages('oauth', '        ')}    }
    location = /authorize {
${proxied(auth, '        proxy_set_header Connection "";\n')}${errorPages('page', '        ')}    }
    location /.well-known/ {
${proxied(auth, '        proxy_set_header Connection "";\n')}${errorPages('oauth', '        ')}    }

    # GraphQL over HTTP and graphql-ws subscriptions (WebSocket upgrade on the same path).
    location = /graphql {
${proxied(
  api,
  `        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $atrium_connection;
        proxy_read_timeout 1h;
        proxy_send_timeout 1h;
`,
)}${errorPages('graphql', '        ')}    }

    # graphql-sse subscriptions: events must reach the client as they are written.
    location /graphql/stream {
${proxied(
  api,
  `        proxy_set_header Connection "";
        proxy_buffering off;
        proxy_cache off;
        proxy_read_timeout 1h;
`,
)}${errorPages('graphql', '        ')}    }

    # Per-instance figures: scrape each instance directly, not a random one through here.
    location = /metrics {
        return 404;
    }

    # REST, docs, health.
    location / {
${proxied(api, '        proxy_set_header Connection "";\n        proxy_read_timeout 35s;\n')}    }

    # The pages the error_page lines above lead to (src/cluster/nginx-errors.ts).
${(['rest', 'graphql', 'oauth', 'page'] as const).map((s) => errorLocations(s, '    ')).join('')}}
`);
  if (grpc) {
    parts.push(`
# gRPC: HTTP/2 without TLS (h2c) on both sides.
server {
    listen ${site.grpcListen} http2;
    # Atrium refuses a message over BODY_LIMIT_BYTES (${limit}) with its own RESOURCE_EXHAUSTED, on
    # reading its length prefix. nginx can only count a call's whole request body, every message of
    # a client stream (server reflection's) together, and once the instance has answered headers it
    # can only reset the stream (INTERNAL, no status): no limit here, the instance's is per message.
    client_max_body_size 0;
${selector(grpc, site.grpc, dir)}    # A gRPC client reads a status from trailers, never an HTML page: what nginx answers itself
    # (UNAVAILABLE for an instance down) is one, before any answer of an instance has begun.
${errorPages('grpc', '    ')}
    location / {
        grpc_pass grpc://$${grpc};
        grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        grpc_set_header X-Request-Id ${REQUEST_ID_VAR};
        grpc_read_timeout 1h;
        grpc_send_timeout 1h;
        grpc_next_upstream error timeout;
        grpc_next_upstream_tries 3;
    }

${errorLocations('grpc', '    ')}}
`);
  }
  return parts.join('\n');
}

/** A whole nginx.conf for a private nginx run from `prefix` (atrium cluster): no system paths. */
export function renderNginxMain(site: NginxSite, prefix: string): string {
  const local = { outOfRotationDir: `${prefix}/out-of-rotation`, ...site };
  return `# atrium cluster: a private nginx, not the system service.
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;

events {
    worker_connections 1024;
}

http {
    access_log off;
    client_body_temp_path ${prefix}/client_body;
    proxy_temp_path ${prefix}/proxy;
    fastcgi_temp_path ${prefix}/fastcgi;
    uwsgi_temp_path ${prefix}/uwsgi;
    scgi_temp_path ${prefix}/scgi;
    default_type application/octet-stream;
    server_tokens off;

${renderNginxSite(local)
  .split('\n')
  .map((l) => (l === '' ? l : `    ${l}`))
  .join('\n')}
}
`;
}

/**
 * The site deploy/compose.yaml runs: the same layout as `atrium cluster`, addressed by service
 * name. deploy/nginx/atrium.conf is this, rendered (a test keeps the two equal). compose.yaml sets
 * no BODY_LIMIT_BYTES, so its instances run with the default, and so does this (a test checks).
 */
export const COMPOSE_SITE: NginxSite = {
  httpListen: '8080',
  grpcListen: '8081',
  api: ['api-1:3000', 'api-2:3000'],
  auth: ['auth-1:3000'],
  grpc: ['grpc-1:50051'],
  bodyLimitBytes: bodyLimitBytesFrom({}),
};
