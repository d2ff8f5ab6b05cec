import { isIP } from 'node:net';
import { withoutPassword } from './redact.js';

/**
 * Every environment variable Atrium reads, in one table: the parser, the default and the text that
 * both the start-up error and the README's configuration section are made from.
 */
export type NodeEnv = 'development' | 'test' | 'production';
export type TokenSigning = 'rs256' | 'hs256';

export interface Config {
  host: string;
  port: number;
  grpcPort: number;
  databaseUrl: string;
  redisUrl: string | undefined;
  nodeEnv: NodeEnv;
  publicUrl: string;
  authUrl: string;
  tokenSigning: TokenSigning;
  jwtSecret: string | undefined;
  corsOrigins: string[];
  webhookTimeoutMs: number;
  webhookBackoffBaseMs: number;
  webhookAllowPrivate: boolean;
  persistedQueriesFile: string | undefined;
  logLevel: string;
  v1Sunset: Date;
  requestTimeoutMs: number;
  bodyLimitBytes: number;
  /** Proxies whose X-Forwarded-For is believed: false, a hop count, or addresses and CIDRs. */
  trustProxy: false | number | string[];
  shutdownDelayMs: number;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly accepts: string,
    readonly got: string,
  ) {
    super(`${variable}: ${accepts} (got ${JSON.stringify(got)})`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export interface VariableSpec {
  name: string;
  default: string;
  accepts: string;
  meaning: string;
}

const isPort = (v: number) => Number.isInteger(v) && v >= 0 && v <= 65535;

function int(name: string, raw: string, accepts: string, ok: (n: number) => boolean): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, accepts, raw);
  const n = Number(raw);
  if (!ok(n)) throw new ConfigError(name, accepts, raw);
  return n;
}

/** What every boolean variable accepts, in its doc row and in its error, the same words the parser knows. */
const BOOL_ACCEPTS = 'true or false (also 1/0, yes/no, on/off)';

function bool(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, BOOL_ACCEPTS, raw);
}

function url(name: string, raw: string, protocols: string[]): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `an absolute URL (${protocols.join(', ')})`, raw);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `an absolute URL (${protocols.join(', ')})`, raw);
  }
  return raw.replace(/\/+$/, '');
}

const REDIS_ACCEPTS = 'redis://[user:password@]host[:port][/db] or rediss://..., db a non-negative integer';

/**
 * REDIS_URL as ioredis reads it: the path is the database index (so is a `?db=` parameter), and
 * ioredis sends `SELECT <whatever the path says>`, so `/abc` would reach the server as `SELECT NaN`
 * and fail after the process started. Checked here instead, with the host and port.
 */
function redisUrlChecked(raw: string): string {
  const refuse = (why: string): never => {
    throw new ConfigError('REDIS_URL', `${REDIS_ACCEPTS} (${why})`, withoutPassword(raw));
  };
  if (!/^rediss?:\/\//i.test(raw)) refuse('it must start with redis:// or rediss://');
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return refuse('not a URL: check the host, the port and any [IPv6] brackets');
  }
  if (parsed.hostname === '') refuse('no host');
  if (parsed.port !== '' && Number(parsed.port) === 0) refuse('port 0');
  const dbIndex = (where: string, value: string) => {
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value)))
      refuse(`the database index in ${where} must be a non-negative integer, got "${value}"`);
  };
  const path = parsed.pathname;
  if (path !== '' && path !== '/') dbIndex('the path', decodeURIComponent(path.slice(1)));
  const dbParam = parsed.searchParams.get('db');
  if (dbParam !== null) dbIndex('?db=', dbParam);
  return raw.replace(/\/+$/, '');
}

/** The SSL modes node-postgres knows; any other is refused rather than silently ignored. */
export const PG_SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/**
 * A postgres:// URL node-postgres can read. It parses the URL with WHATWG URL (retrying with a
 * dummy host for `postgres://user@/db`, a socket given by `?host=`), so a URL that fails here would
 * fail there as a bare "Invalid URL" on the first query. Returns the reason it cannot, or undefined.
 */
function postgresUrlProblem(raw: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    try {
      parsed = new URL(raw.replace('@/', '@___DUMMY___/'));
    } catch {
      return 'not a URL: check the host, the port (1-65535) and any [IPv6] brackets';
    }
  }
  if (parsed.port !== '' && Number(parsed.port) === 0) return 'port 0';
  const sslmode = parsed.searchParams.get('sslmode');
  if (sslmode !== null && !PG_SSL_MODES.includes(sslmode))
    return `sslmode must be one of ${PG_SSL_MODES.join(', ')}, got "${sslmode}"`;
  return undefined;
}

/** The address PUBLIC_URL (and so AUTH_URL) defaults to: this process's own, HOST and PORT. */
function ownUrl(host: string, port: number): string {
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/**
 * PORT=0 leaves the port to the system, and a PUBLIC_URL or AUTH_URL left to its default would
 * advertise port 0 (the token issuer, discovery, the OpenAPI servers), which no client can reach:
 * such a configuration must learn its port before the services that advertise it are built.
 */
export function awaitsBoundPort(config: Config): boolean {
  const unbound = ownUrl(config.host, 0);
  return config.port === 0 && (config.publicUrl === unbound || config.authUrl === unbound);
}

/** The configuration once HTTP holds its port: the defaulted URLs name that port, the others stay. */
export function atBoundPort(config: Config, port: number): Config {
  const unbound = ownUrl(config.host, config.port);
  const follow = (u: string) => (u === unbound ? ownUrl(config.host, port) : u);
  return { ...config, port, publicUrl: follow(config.publicUrl), authUrl: follow(config.authUrl) };
}

/**
 * PORT and GRPC_PORT are one process's two listeners when it serves gRPC (HTTP always listens):
 * the same port for both is a setting that cannot work, refused before anything starts rather than
 * found as the second listen's EADDRINUSE. Port 0 (any free port) twice is fine.
 */
export function refuseSharedPort(config: Config, servesGrpc: boolean): void {
  if (servesGrpc && config.port !== 0 && config.port === config.grpcPort) {
    throw new ConfigError(
      'GRPC_PORT',
      `a port other than PORT (both are ${config.port}: this process listens on PORT for HTTP and on GRPC_PORT for gRPC)`,
      String(config.grpcPort),
    );
  }
}

export const VARIABLES: VariableSpec[] = [
  {
    name: 'HOST',
    default: '127.0.0.1',
    accepts: 'an interface address or host name',
    meaning: 'interface for HTTP and gRPC',
  },
  {
    name: 'PORT',
    default: '3000',
    accepts: 'an integer port 0-65535',
    meaning: 'HTTP: GraphQL, REST, docs, token server',
  },
  {
    name: 'GRPC_PORT',
    default: '50051',
    accepts: 'an integer port 0-65535',
    meaning: 'gRPC (users.v1.UserService, health, reflection)',
  },
  {
    name: 'DATABASE_URL',
    default: 'sqlite:./data/atrium.db',
    accepts:
      'sqlite:<path>, sqlite::memory: or postgres://[user[:password]@]host[:port]/database[?sslmode=disable|prefer|require|verify-ca|verify-full|no-verify]',
    meaning:
      'the data store; sslmode prefer, require and verify-ca are checked as verify-full (TLS required, certificate and host name verified), no-verify encrypts without checking',
  },
  {
    name: 'REDIS_URL',
    default: '(unset)',
    accepts: `${REDIS_ACCEPTS}; the index must exist on the server and the server must accept the user and password (both checked at start)`,
    meaning:
      'when set, rate limits, caches, complexity budgets and the GraphQL broadcast are shared through Redis',
  },
  {
    name: 'NODE_ENV',
    default: 'development',
    accepts: 'development, test or production',
    meaning:
      'production turns on the production rules (no introspection, no persisted-query registration, no GraphiQL, masked errors)',
  },
  {
    name: 'PUBLIC_URL',
    default: 'http://HOST:PORT (with PORT=0, the port bound)',
    accepts: 'an absolute http(s) URL',
    meaning: '{base_url}',
  },
  {
    name: 'AUTH_URL',
    default: 'PUBLIC_URL',
    accepts: 'an absolute http(s) URL',
    meaning: '{auth_url}; the token issuer `iss`',
  },
  {
    name: 'TOKEN_SIGNING',
    default: 'rs256',
    accepts: 'rs256 or hs256',
    meaning: 'rs256 (OAuth variant, JWKS) or hs256 (symmetric variant, needs JWT_SECRET)',
  },
  {
    name: 'JWT_SECRET',
    default: '(unset)',
    accepts: 'a secret of at least 32 bytes',
    meaning: 'HS256 signing secret; required when TOKEN_SIGNING=hs256',
  },
  {
    name: 'CORS_ORIGINS',
    default: '(empty)',
    accepts: 'comma-separated exact origins such as https://app.example.com',
    meaning: 'origins allowed to call the API from a browser',
  },
  {
    name: 'WEBHOOK_TIMEOUT_MS',
    default: '30000',
    accepts: 'an integer number of milliseconds, 1-300000',
    meaning: 'per-attempt webhook timeout (during a drain, at most 25 s after SIGTERM: docs/webhooks.md)',
  },
  {
    name: 'WEBHOOK_BACKOFF_BASE_MS',
    default: '1000',
    accepts: 'an integer number of milliseconds, 0-3600000',
    meaning: 'backoff unit: waits are base x 2^(n-1)',
  },
  {
    name: 'WEBHOOK_ALLOW_PRIVATE',
    default: 'true outside production',
    accepts: BOOL_ACCEPTS,
    meaning: 'allow webhook URLs that resolve to loopback or private addresses',
  },
  {
    name: 'PERSISTED_QUERIES_FILE',
    default: '(unset)',
    accepts: 'a path to a JSON manifest',
    meaning: 'known GraphQL operations (hash to query) loaded at start',
  },
  {
    name: 'LOG_LEVEL',
    default: 'info (silent under test)',
    accepts: 'fatal, error, warn, info, debug, trace or silent',
    meaning: 'pino log level; logs go to stderr',
  },
  {
    name: 'V1_SUNSET',
    default: '2027-06-30',
    accepts: 'a date YYYY-MM-DD',
    meaning: 'the Sunset date announced on every /api/v1 response (one past is warned about at start)',
  },
  {
    name: 'REQUEST_TIMEOUT_MS',
    default: '30000',
    accepts: 'an integer number of milliseconds, 1-600000',
    meaning: 'a request that has no answer by then gets 503',
  },
  {
    name: 'BODY_LIMIT_BYTES',
    default: '1048576',
    accepts: 'an integer number of bytes, 1-104857600',
    meaning: 'larger request bodies get 413',
  },
  {
    name: 'TRUST_PROXY',
    default: 'off',
    accepts:
      'off; a hop count 1-10; or comma-separated addresses, CIDRs and loopback, linklocal, uniquelocal',
    meaning:
      'proxies whose X-Forwarded-For names the client (per-address login limits, logs); from any other peer the header is ignored',
  },
  {
    name: 'SHUTDOWN_DELAY_MS',
    default: '0',
    accepts: 'an integer number of milliseconds, 0-60000',
    meaning:
      'on SIGTERM, keep serving this long (readiness 503) before refusing new connections, then wait up to as long again for the balancer to close its kept-alive ones (every answer closing its connection); for processes behind a load balancer, over its upstream keep-alive timeout',
  },
];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * BODY_LIMIT_BYTES alone, as parseConfig reads it: `atrium cluster` renders nginx's own body limit
 * from the value its instances will run with (src/cluster/nginx-config.ts).
 */
export function bodyLimitBytesFrom(env: Env): number {
  const raw = env.BODY_LIMIT_BYTES?.trim();
  return int(
    'BODY_LIMIT_BYTES',
    raw === undefined || raw === '' ? '1048576' : raw,
    'an integer number of bytes, 1-104857600',
    (n) => n >= 1 && n <= 104_857_600,
  );
}

/** Parses and validates the environment; throws ConfigError naming the first bad variable. */
export function parseConfig(env: Env): Config {
  const get = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  const nodeEnvRaw = get('NODE_ENV') ?? 'development';
  if (!['development', 'test', 'production'].includes(nodeEnvRaw)) {
    throw new ConfigError('NODE_ENV', 'development, test or production', nodeEnvRaw);
  }
  const nodeEnv = nodeEnvRaw as NodeEnv;

  const host = get('HOST') ?? '127.0.0.1';
  // The URL check catches what the characters alone allow (256.1.1.1, a bad IPv6 form); without it
  // the error would name PUBLIC_URL, which the user never set.
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host) || !URL.canParse(ownUrl(host, 0)))
    throw new ConfigError('HOST', 'an interface address or host name', host);
  const port = int('PORT', get('PORT') ?? '3000', 'an integer port 0-65535', isPort);
  const grpcPort = int('GRPC_PORT', get('GRPC_PORT') ?? '50051', 'an integer port 0-65535', isPort);

  const databaseUrl = get('DATABASE_URL') ?? 'sqlite:./data/atrium.db';
  if (!/^sqlite:.+/.test(databaseUrl) && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    throw new ConfigError(
      'DATABASE_URL',
      'sqlite:<path>, sqlite::memory: or postgres://...',
      withoutPassword(databaseUrl),
    );
  }
  const pgProblem = databaseUrl.startsWith('sqlite:') ? undefined : postgresUrlProblem(databaseUrl);
  if (pgProblem !== undefined) {
    throw new ConfigError(
      'DATABASE_URL',
      `postgres://[user[:password]@]host[:port]/database[?sslmode=...] (${pgProblem})`,
      withoutPassword(databaseUrl),
    );
  }

  const redisRaw = get('REDIS_URL');
  const redisUrl = redisRaw === undefined ? undefined : redisUrlChecked(redisRaw);

  const publicUrl = url('PUBLIC_URL', get('PUBLIC_URL') ?? ownUrl(host, port), ['http:', 'https:']);
  const authUrl = url('AUTH_URL', get('AUTH_URL') ?? publicUrl, ['http:', 'https:']);

  const signingRaw = (get('TOKEN_SIGNING') ?? 'rs256').toLowerCase();
  if (signingRaw !== 'rs256' && signingRaw !== 'hs256')
    throw new ConfigError('TOKEN_SIGNING', 'rs256 or hs256', signingRaw);
  const jwtSecret = get('JWT_SECRET');
  if (jwtSecret !== undefined && Buffer.byteLength(jwtSecret) < 32) {
    throw new ConfigError('JWT_SECRET', 'a secret of at least 32 bytes', '<redacted>');
  }
  if (signingRaw === 'hs256' && jwtSecret === undefined) {
    throw new ConfigError(
      'JWT_SECRET',
      'a secret of at least 32 bytes (required when TOKEN_SIGNING=hs256)',
      '',
    );
  }

  const corsOrigins = (get('CORS_ORIGINS') ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  for (const origin of corsOrigins) {
    let ok = false;
    try {
      const u = new URL(origin);
      ok =
        (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === origin && !origin.includes('*');
    } catch {
      ok = false;
    }
    if (!ok)
      throw new ConfigError(
        'CORS_ORIGINS',
        'comma-separated exact origins such as https://app.example.com (no path, no wildcard)',
        origin,
      );
  }

  const webhookTimeoutMs = int(
    'WEBHOOK_TIMEOUT_MS',
    get('WEBHOOK_TIMEOUT_MS') ?? '30000',
    'an integer number of milliseconds, 1-300000',
    (n) => n >= 1 && n <= 300_000,
  );
  const webhookBackoffBaseMs = int(
    'WEBHOOK_BACKOFF_BASE_MS',
    get('WEBHOOK_BACKOFF_BASE_MS') ?? '1000',
    'an integer number of milliseconds, 0-3600000',
    (n) => n >= 0 && n <= 3_600_000,
  );
  const allowRaw = get('WEBHOOK_ALLOW_PRIVATE');
  const webhookAllowPrivate =
    allowRaw === undefined ? nodeEnv !== 'production' : bool('WEBHOOK_ALLOW_PRIVATE', allowRaw);

  const persistedQueriesFile = get('PERSISTED_QUERIES_FILE');

  const logLevel = (get('LOG_LEVEL') ?? (nodeEnv === 'test' ? 'silent' : 'info')).toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', LOG_LEVELS.join(', '), logLevel);

  const sunsetRaw = get('V1_SUNSET') ?? '2027-06-30';
  const v1Sunset = new Date(`${sunsetRaw}T00:00:00Z`);
  // The round trip refuses a day the month lacks (2027-02-30), which Date would roll into March.
  if (
    !/^\d{4}-\d{2}-\d{2}$/.test(sunsetRaw) ||
    Number.isNaN(v1Sunset.getTime()) ||
    v1Sunset.toISOString().slice(0, 10) !== sunsetRaw
  ) {
    throw new ConfigError('V1_SUNSET', 'a date YYYY-MM-DD', sunsetRaw);
  }

  const requestTimeoutMs = int(
    'REQUEST_TIMEOUT_MS',
    get('REQUEST_TIMEOUT_MS') ?? '30000',
    'an integer number of milliseconds, 1-600000',
    (n) => n >= 1 && n <= 600_000,
  );
  const bodyLimitBytes = bodyLimitBytesFrom(env);

  const trustProxy = parseTrustProxy(get('TRUST_PROXY'));
  const shutdownDelayMs = int(
    'SHUTDOWN_DELAY_MS',
    get('SHUTDOWN_DELAY_MS') ?? '0',
    'an integer number of milliseconds, 0-60000',
    (n) => n >= 0 && n <= 60_000,
  );

  return {
    host,
    port,
    grpcPort,
    databaseUrl,
    redisUrl,
    nodeEnv,
    publicUrl,
    authUrl,
    tokenSigning: signingRaw,
    jwtSecret,
    corsOrigins,
    webhookTimeoutMs,
    webhookBackoffBaseMs,
    webhookAllowPrivate,
    persistedQueriesFile,
    logLevel,
    v1Sunset,
    requestTimeoutMs,
    bodyLimitBytes,
    trustProxy,
    shutdownDelayMs,
  };
}

const TRUST_PROXY_ACCEPTS =
  'off, a hop count 1-10, or comma-separated IP addresses, CIDRs (10.0.0.0/8) and loopback, linklocal, uniquelocal';
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * TRUST_PROXY: whom to believe about the client's address. Never "everyone": a forged
 * X-Forwarded-For from a peer that is not a listed proxy must change nothing.
 */
function parseTrustProxy(raw: string | undefined): false | number | string[] {
  if (raw === undefined || ['off', 'false', '0', 'no'].includes(raw.toLowerCase())) return false;
  if (/^\d+$/.test(raw)) return int('TRUST_PROXY', raw, TRUST_PROXY_ACCEPTS, (n) => n >= 1 && n <= 10);
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) throw new ConfigError('TRUST_PROXY', TRUST_PROXY_ACCEPTS, raw);
  for (const entry of entries) {
    if (!isProxyEntry(entry)) throw new ConfigError('TRUST_PROXY', TRUST_PROXY_ACCEPTS, entry);
  }
  return entries;
}

function isProxyEntry(entry: string): boolean {
  if (PROXY_RANGE_NAMES.includes(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || address === undefined) return false;
  const version = isIP(address);
  if (version === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (version === 4 ? 32 : 128);
}
