import { describe, expect, it } from 'vitest';
import {
  atBoundPort,
  awaitsBoundPort,
  ConfigError,
  parseConfig,
  refuseSharedPort,
  VARIABLES,
} from '../../src/config/schema.js';

const failure = (env: Record<string, string>) => {
  try {
    parseConfig(env);
  } catch (err) {
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
};

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 3000,
      grpcPort: 50051,
      databaseUrl: 'sqlite:./data/atrium.db',
      redisUrl: undefined,
      nodeEnv: 'development',
      publicUrl: 'http://127.0.0.1:3000',
      authUrl: 'http://127.0.0.1:3000',
      tokenSigning: 'rs256',
      corsOrigins: [],
      webhookTimeoutMs: 30000,
      webhookBackoffBaseMs: 1000,
      webhookAllowPrivate: true,
      requestTimeoutMs: 30000,
      bodyLimitBytes: 1048576,
    });
    expect(c.v1Sunset.toISOString()).toBe('2027-06-30T00:00:00.000Z');
  });

  it('derives PUBLIC_URL from HOST and PORT, and AUTH_URL from PUBLIC_URL', () => {
    const c = parseConfig({ HOST: '0.0.0.0', PORT: '8080', PUBLIC_URL: 'https://api.example.com/' });
    expect(c.publicUrl).toBe('https://api.example.com');
    expect(c.authUrl).toBe('https://api.example.com');
  });

  it('with PORT=0, has the URLs left to their default name the port bound, and only those', () => {
    const bound = (env: Record<string, string>) => {
      const c = parseConfig({ PORT: '0', ...env });
      return awaitsBoundPort(c) ? atBoundPort(c, 41234) : c;
    };
    expect(bound({})).toMatchObject({
      port: 41234,
      publicUrl: 'http://127.0.0.1:41234',
      authUrl: 'http://127.0.0.1:41234',
    });
    expect(bound({ HOST: '::1' })).toMatchObject({
      publicUrl: 'http://[::1]:41234',
      authUrl: 'http://[::1]:41234',
    });
    expect(bound({ AUTH_URL: 'https://auth.example.com' })).toMatchObject({
      publicUrl: 'http://127.0.0.1:41234',
      authUrl: 'https://auth.example.com',
    });
    expect(bound({ PUBLIC_URL: 'https://api.example.com' })).toMatchObject({
      port: 0,
      publicUrl: 'https://api.example.com',
      authUrl: 'https://api.example.com',
    });
    expect(awaitsBoundPort(parseConfig({ PORT: '3000' }))).toBe(false);
  });

  it('turns off private webhook targets in production unless asked', () => {
    expect(parseConfig({ NODE_ENV: 'production' }).webhookAllowPrivate).toBe(false);
    expect(parseConfig({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: 'true' }).webhookAllowPrivate).toBe(
      true,
    );
  });

  it('reads every word its doc row and its error name for a boolean, and names them when refusing', () => {
    const allow = (v: string) =>
      parseConfig({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: v }).webhookAllowPrivate;
    for (const v of ['true', 'TRUE', '1', 'yes', 'on', ' On ']) expect(allow(v), v).toBe(true);
    for (const v of ['false', '0', 'no', 'off']) expect(allow(v), v).toBe(false);
    const row = VARIABLES.find((v) => v.name === 'WEBHOOK_ALLOW_PRIVATE')!;
    const err = failure({ WEBHOOK_ALLOW_PRIVATE: 'maybe' });
    for (const word of ['true', 'false', '1/0', 'yes/no', 'on/off']) {
      expect(row.accepts).toContain(word);
      expect(err.message).toContain(word);
    }
  });

  it('parses CORS origins as an exact list', () => {
    expect(parseConfig({ CORS_ORIGINS: 'https://a.example.com, http://localhost:5173' }).corsOrigins).toEqual(
      ['https://a.example.com', 'http://localhost:5173'],
    );
  });

  const bad: Array<[string, string]> = [
    ['HOST', 'my host'],
    ['HOST', '256.1.1.1'],
    ['HOST', '::g'],
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['GRPC_PORT', '-1'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'http://localhost'],
    // ioredis would send SELECT NaN (or SELECT -1) once connected, long after the start succeeded.
    ['REDIS_URL', 'redis://127.0.0.1:6379/abc'],
    ['REDIS_URL', 'redis://127.0.0.1:6379/-1'],
    ['REDIS_URL', 'redis://127.0.0.1:6379/1.5'],
    ['REDIS_URL', 'redis://127.0.0.1:6379/0/x'],
    ['REDIS_URL', 'redis://127.0.0.1:6379?db=abc'],
    ['REDIS_URL', 'redis://127.0.0.1:notaport'],
    ['REDIS_URL', 'redis://127.0.0.1:0'],
    ['REDIS_URL', 'redis://:6379'],
    ['REDIS_URL', 'redis:localhost'],
    // node-postgres would fail the first query with a bare "Invalid URL".
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:notaport/x'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:99999/x'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:65536/x'],
    ['DATABASE_URL', 'postgres://postgres@[::1/x'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1/x?sslmode=bogus'],
    ['NODE_ENV', 'staging'],
    ['PUBLIC_URL', 'not a url'],
    ['AUTH_URL', 'ftp://auth.example.com'],
    ['TOKEN_SIGNING', 'es256'],
    ['JWT_SECRET', 'short'],
    ['CORS_ORIGINS', '*'],
    ['CORS_ORIGINS', 'https://a.example.com/path'],
    ['CORS_ORIGINS', 'https://*.example.com'],
    ['WEBHOOK_TIMEOUT_MS', '0'],
    ['WEBHOOK_BACKOFF_BASE_MS', '1.5'],
    ['WEBHOOK_ALLOW_PRIVATE', 'maybe'],
    ['LOG_LEVEL', 'loud'],
    ['V1_SUNSET', '30/06/2027'],
    ['V1_SUNSET', '2027-02-30'],
    ['V1_SUNSET', '2027-13-45'],
    ['REQUEST_TIMEOUT_MS', 'soon'],
    ['BODY_LIMIT_BYTES', '0'],
  ];
  it.each(bad)('refuses %s=%s with an error naming the variable', (name, value) => {
    const err = failure({ [name]: value });
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.variable).toBe(name);
    expect(err.message.startsWith(`${name}: `)).toBe(true);
    expect(err.message).not.toContain('\n');
  });

  it('accepts the REDIS_URL and DATABASE_URL forms its clients read', () => {
    for (const redis of [
      'redis://127.0.0.1',
      'redis://127.0.0.1:6379/',
      'redis://127.0.0.1:6379/15',
      'rediss://user:secret@redis.example.com:6380/0',
      'redis://[::1]:6379/3?db=3',
    ]) {
      expect(parseConfig({ REDIS_URL: redis }).redisUrl, redis).toBe(redis.replace(/\/+$/, ''));
    }
    for (const database of [
      'postgres://postgres@127.0.0.1:5432/atrium',
      'postgresql://u:p@db.example.com/atrium?sslmode=require',
      'postgres://u@[::1]:5433/atrium?sslmode=verify-full',
      'postgres://u@/atrium?host=/var/run/postgresql',
      'postgres://u@db/atrium?sslmode=no-verify',
    ]) {
      expect(parseConfig({ DATABASE_URL: database }).databaseUrl, database).toBe(database);
    }
  });

  it('never echoes a password from REDIS_URL or DATABASE_URL', () => {
    expect(failure({ REDIS_URL: 'redis://u:hunter2@127.0.0.1/abc' }).message).not.toContain('hunter2');
    expect(failure({ DATABASE_URL: 'postgres://u:hunter2@[::1/x' }).message).not.toContain('hunter2');
    expect(failure({ DATABASE_URL: 'postgres://u:hunter2@h/x?sslmode=bad' }).message).not.toContain(
      'hunter2',
    );
  });

  it('refuses PORT equal to GRPC_PORT for a process that serves gRPC, naming both', () => {
    const same = parseConfig({ PORT: '4600', GRPC_PORT: '4600' });
    let thrown: unknown;
    try {
      refuseSharedPort(same, true);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect(thrown).toMatchObject({ variable: 'GRPC_PORT', got: '4600' });
    expect((thrown as Error).message).toContain('PORT');
    // Without gRPC only PORT is bound; port 0 twice is two free ports.
    expect(() => refuseSharedPort(same, false)).not.toThrow();
    expect(() => refuseSharedPort(parseConfig({ PORT: '0', GRPC_PORT: '0' }), true)).not.toThrow();
  });

  it('requires JWT_SECRET for the HS256 variant, and never echoes the secret', () => {
    expect(failure({ TOKEN_SIGNING: 'hs256' }).variable).toBe('JWT_SECRET');
    const err = failure({ JWT_SECRET: 'tooshort-secret' });
    expect(err.message).not.toContain('tooshort-secret');
    expect(parseConfig({ TOKEN_SIGNING: 'hs256', JWT_SECRET: 'x'.repeat(32) }).tokenSigning).toBe('hs256');
  });

  it('documents every variable it reads', () => {
    const names = VARIABLES.map((v) => v.name);
    for (const n of [
      'HOST',
      'PORT',
      'GRPC_PORT',
      'DATABASE_URL',
      'REDIS_URL',
      'NODE_ENV',
      'PUBLIC_URL',
      'AUTH_URL',
      'TOKEN_SIGNING',
      'CORS_ORIGINS',
      'WEBHOOK_TIMEOUT_MS',
      'WEBHOOK_BACKOFF_BASE_MS',
      'WEBHOOK_ALLOW_PRIVATE',
      'PERSISTED_QUERIES_FILE',
    ]) {
      expect(names).toContain(n);
    }
  });
});
