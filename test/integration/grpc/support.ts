import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { ServicesOptions } from '../../../src/compose.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { decodeStatus, STATUS_DETAILS_KEY, type RichStatus } from '../../../src/grpc/status-details.js';
import { until } from '../../helpers/wait.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/**
 * A client built from proto/users/v1/users.proto with @grpc/proto-loader, as any grpc-js user
 * would build one: it shares nothing with the server's generated code.
 */
const definition = loadSync('users/v1/users.proto', {
  includeDirs: [`${root}/proto`],
  keepCase: true,
  longs: Number,
  defaults: true,
});
const healthDefinition = loadSync('health/v1/health.proto', {
  includeDirs: [`${root}/node_modules/grpc-health-check/proto`],
  keepCase: true,
  enums: String,
  defaults: true,
});
type ClientCtor = new (address: string, credentials: grpc.ChannelCredentials) => grpc.Client;
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  users: { v1: { UserService: ClientCtor } };
};
const loadedHealth = grpc.loadPackageDefinition(healthDefinition) as unknown as {
  grpc: { health: { v1: { Health: ClientCtor } } };
};

export interface UserMessage {
  id: string;
  name: string;
  email: string;
  role: string;
  created_at: number;
  organization_id: string;
}
export interface ActivityMessage {
  event_type: string;
  timestamp: number;
  metadata: Record<string, string>;
}

/**
 * What `buf curl --list-methods` finds by reflection: the user service, health and reflection itself
 * (both versions it answers, as grpc-go and grpc-java servers list theirs), nothing else.
 */
export const REFLECTED_METHODS = [
  'grpc.health.v1.Health/Check',
  'grpc.health.v1.Health/List',
  'grpc.health.v1.Health/Watch',
  'grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
  'grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo',
  'users.v1.UserService/GetUser',
  'users.v1.UserService/ListUsers',
  'users.v1.UserService/StreamUserActivity',
  'users.v1.UserService/UpdateUser',
];

export type Client = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

/** A users.v1.UserService client on its own channel. */
export const userServiceClient = (address: string): Client =>
  new loaded.users.v1.UserService(address, grpc.credentials.createInsecure()) as Client;
/** A grpc.health.v1.Health client on its own channel. */
export const healthClient = (address: string): Client =>
  new loadedHealth.grpc.health.v1.Health(address, grpc.credentials.createInsecure()) as Client;

export interface GrpcAtrium extends TestAtrium {
  address: string;
  httpUrl: string;
  client(): Client;
  health(): Client;
}

/** An Atrium with the api, auth and grpc roles listening on ephemeral ports of 127.0.0.1. */
export async function startGrpcAtrium(
  env: Record<string, string> = {},
  options: ServicesOptions = {},
): Promise<GrpcAtrium> {
  const roles = ['api', 'auth', 'grpc'] as const;
  const atrium = await startTestAtrium({ HOST: '127.0.0.1', GRPC_PORT: '0', ...env }, roles, options);
  const { grpcAddress, httpUrl } = await atrium.listen();
  const clients: grpc.Client[] = [];
  const make = (build: (address: string) => Client) => {
    const c = build(grpcAddress!);
    clients.push(c);
    return c;
  };
  return {
    ...atrium,
    address: grpcAddress!,
    httpUrl: httpUrl!,
    client: () => make(userServiceClient),
    health: () => make(healthClient),
    async stop() {
      for (const c of clients) c.close();
      await atrium.stop();
    },
  };
}

export function metadataFor(headers: Record<string, string>): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(headers)) md.set(k, v);
  return md;
}

export interface CallResult<T> {
  error: grpc.ServiceError | null;
  value: T | undefined;
  headers: grpc.Metadata | undefined;
}

/** A unary call as a promise that never rejects: the test looks at the error itself. */
export function unary<T>(
  client: Client,
  method: string,
  request: object,
  headers: Record<string, string> = {},
  options: grpc.CallOptions = {},
): Promise<CallResult<T>> {
  return new Promise((resolve) => {
    let responseHeaders: grpc.Metadata | undefined;
    const call = client[method]!(
      request,
      metadataFor(headers),
      options,
      (error: grpc.ServiceError | null, value: T) => resolve({ error, value, headers: responseHeaders }),
    ) as grpc.ClientUnaryCall;
    call.on('metadata', (md) => (responseHeaders = md));
  });
}

export interface StreamResult<T> {
  messages: T[];
  status: grpc.StatusObject | undefined;
  error: grpc.ServiceError | undefined;
}

/** Reads a whole server stream. */
export function collect<T>(
  client: Client,
  method: string,
  request: object,
  headers: Record<string, string> = {},
  options: grpc.CallOptions = {},
): Promise<StreamResult<T>> {
  return new Promise((resolve) => {
    const call = client[method]!(request, metadataFor(headers), options) as grpc.ClientReadableStream<T>;
    const result: StreamResult<T> = { messages: [], status: undefined, error: undefined };
    call.on('data', (m: T) => result.messages.push(m));
    call.on('error', (e: grpc.ServiceError) => (result.error = e));
    call.on('status', (s) => {
      result.status = s;
      // 'status' can come before 'error' for failed calls; let the error land first.
      setImmediate(() => resolve(result));
    });
  });
}

/** The google.rpc.Status in the error's trailers. */
export function richStatus(error: grpc.ServiceError): RichStatus {
  const bin = error.metadata.get(STATUS_DETAILS_KEY)[0];
  if (!Buffer.isBuffer(bin)) throw new Error('no grpc-status-details-bin trailer');
  return decodeStatus(bin);
}

export interface Watched {
  /** Every status the stream sent, in order. */
  statuses: string[];
  end: grpc.StatusObject | undefined;
}

/** A grpc.health.v1.Health Watch that records what it hears. */
export function watchHealth(health: Client, service: string): Watched {
  const watched: Watched = { statuses: [], end: undefined };
  const call = health.Watch!({ service }) as grpc.ClientReadableStream<{ status: string }>;
  call.on('data', (m: { status: string }) => watched.statuses.push(m.status));
  call.on('error', () => undefined);
  call.on('status', (s) => (watched.end = s));
  return watched;
}

/**
 * Holds every call of the user `userId` inside the pipeline, after authentication, until `release()`:
 * a call in flight a test can keep open (a drain waits for it). `held` says one has arrived.
 */
export function holdCallsOf(atrium: GrpcAtrium, userId: string): { readonly held: boolean; release(): void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const hold = { held: false, release: () => release() };
  atrium.services.afterAuth.push(async (principal) => {
    if (principal.id !== userId) return;
    hold.held = true;
    await gate;
  });
  return hold;
}

export function waitFor(check: () => boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  return until(check, what, timeoutMs);
}

/**
 * Waits until the server has counted a finished call of `method` with `code` and returns the
 * metrics text. The server records a call when it notices the end, which may be just after the
 * client does.
 */
export async function handledMetrics(atrium: GrpcAtrium, method: string, code: string): Promise<string> {
  const line = new RegExp(`grpc_method="${method}"[^}]*grpc_code="${code}"`);
  let metrics = '';
  for (let i = 0; i < 100 && !line.test(metrics); i++) {
    metrics = await atrium.services.metrics.metrics();
    if (!line.test(metrics)) await new Promise((r) => setTimeout(r, 50));
  }
  return metrics;
}

export interface BufCurlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export const BUF = `${root}/node_modules/.bin/buf`;

/**
 * Why the buf curl tests cannot run here (no buf binary), or undefined. On CI a missing buf fails
 * the file; only a local run may skip, and it says why.
 */
export function bufMissing(): string | undefined {
  if (existsSync(BUF)) return undefined;
  const reason = `buf is missing (${BUF}); npm install provides it`;
  if (process.env.CI === 'true' || process.env.CI === '1')
    throw new Error(`${reason}. CI must run the buf curl tests.`);
  process.stderr.write(`[skipped] buf curl tests: ${reason}.\n`);
  return reason;
}

/**
 * The metadata blocks `buf curl -v` printed as received on the stream that carried `method` (lines
 * `buf: < (#N) Name: value`, a bare `buf: < (#N)` ending each block), names lower-cased. A failed
 * unary call's status comes trailers-only, in one block; a call with messages has a headers block
 * and a trailers block. The status line (`HTTP/2.0 200 OK`) is left out.
 */
export function bufVerboseReceived(stderr: string, method: string): Array<Record<string, string>> {
  const lines = stderr.split('\n');
  const sent = lines
    .map((l) => /^buf: > \(#(\d+)\) POST (\S+)$/.exec(l))
    .find((m) => m !== null && m[2] === `/${method}`);
  if (!sent) throw new Error(`buf curl -v shows no call of ${method}:\n${stderr}`);
  const prefix = `buf: < (#${sent[1]})`;
  const blocks: Array<Record<string, string>> = [];
  let block: Record<string, string> = {};
  for (const line of lines) {
    if (!line.startsWith(prefix)) continue;
    const rest = line.slice(prefix.length).trim();
    if (rest === '') {
      blocks.push(block);
      block = {};
    } else if (!rest.startsWith('HTTP/')) {
      const colon = rest.indexOf(':');
      block[rest.slice(0, colon).toLowerCase()] = rest.slice(colon + 1).trim();
    }
  }
  if (Object.keys(block).length > 0) blocks.push(block);
  return blocks.filter((b) => Object.keys(b).length > 0);
}

/**
 * `buf curl` against the server, its schema taken from server reflection only (run outside the
 * repository, so no local buf.yaml can help it). Exit code: the gRPC status code shifted left 3.
 */
export function bufCurl(address: string, path: string, args: string[] = []): Promise<BufCurlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      BUF,
      ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', ...args, `http://${address}${path}`],
      {
        cwd: tmpdir(),
        env: { PATH: process.env.PATH ?? '', HOME: tmpdir() },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export { grpc, root };

export interface RawGrpcResult {
  /** grpc-status from the trailers (or from the headers of a trailers-only answer). */
  code: number | undefined;
  message: string | undefined;
}

/**
 * One unary call over a bare node:http2 session, for what no grpc-js client sends: a `grpc-timeout`
 * already spent on arrival (`1n`, `0m`). The request is serialised by proto-loader from the proto,
 * as the grpc-js client would.
 */
export function rawUnary(
  address: string,
  method: string,
  request: object,
  headers: Record<string, string> = {},
): Promise<RawGrpcResult> {
  const service = definition['users.v1.UserService'] as Record<
    string,
    { requestSerialize: (value: object) => Buffer }
  >;
  const body = service[method]!.requestSerialize(request);
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${address}`);
    session.on('error', reject);
    const stream = session.request({
      ':method': 'POST',
      ':path': `/users.v1.UserService/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    const result: RawGrpcResult = { code: undefined, message: undefined };
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) result.code = Number(h['grpc-status']);
      if (typeof h['grpc-message'] === 'string') result.message = decodeURIComponent(h['grpc-message']);
    };
    stream.on('response', read);
    stream.on('trailers', read);
    stream.on('data', () => {});
    stream.on('error', reject);
    stream.on('close', () => {
      session.close();
      resolve(result);
    });
    stream.end(frame);
  });
}
