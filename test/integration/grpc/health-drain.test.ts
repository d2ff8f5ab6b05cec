import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/schema.js';
import { closeServices, createServices } from '../../../src/compose.js';
import { freshDatabase, testDialect, type TestDatabase } from '../../helpers/database.js';
import {
  grpc,
  healthClient,
  holdCallsOf,
  metadataFor,
  root,
  startGrpcAtrium,
  unary,
  userServiceClient,
  waitFor,
  watchHealth,
  type ActivityMessage,
  type Client,
  type GrpcAtrium,
  type UserMessage,
} from './support.js';

const { status } = grpc;

interface Followed {
  events: ActivityMessage[];
  started: boolean;
  end: grpc.StatusObject | undefined;
}

function follow(client: Client, userId: string, headers: Record<string, string>): Followed {
  const followed: Followed = { events: [], started: false, end: undefined };
  const call = client.StreamUserActivity!(
    { user_id: userId },
    metadataFor(headers),
  ) as grpc.ClientReadableStream<ActivityMessage>;
  call.on('metadata', () => (followed.started = true));
  call.on('data', (e: ActivityMessage) => followed.events.push(e));
  call.on('error', () => undefined);
  call.on('status', (s) => (followed.end = s));
  return followed;
}

describe('gRPC health', () => {
  let atrium: GrpcAtrium;
  beforeAll(async () => {
    atrium = await startGrpcAtrium();
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('answers Check per service with no credentials, and NOT_FOUND for an unknown service', async () => {
    const health = atrium.health();
    for (const service of ['', 'users.v1.UserService']) {
      const { error, value } = await unary<{ status: string }>(health, 'Check', { service });
      expect(error).toBeNull();
      expect(value?.status).toBe('SERVING');
    }
    const unknown = await unary(health, 'Check', { service: 'users.v1.Nope' });
    expect(unknown.error?.code).toBe(status.NOT_FOUND);
  });

  it('streams the status on Watch', async () => {
    const watched = watchHealth(atrium.health(), 'users.v1.UserService');
    await waitFor(() => watched.statuses.length > 0, 5_000, 'the first status');
    expect(watched.statuses).toEqual(['SERVING']);
  });
});

describe('gRPC drain (close() in process)', () => {
  it('turns health NOT_SERVING, refuses new calls, ends streams cleanly and finishes the call in flight', async () => {
    const atrium = await startGrpcAtrium();
    try {
      const member = await atrium.caller();
      const slow = await atrium.caller();
      const hold = holdCallsOf(atrium, slow.userId);

      const client = atrium.client();
      const watched = watchHealth(atrium.health(), '');
      const followed = follow(client, member.userId, member.headers);
      await waitFor(() => watched.statuses.length > 0 && followed.started, 5_000, 'the streams');
      const inFlight = unary<UserMessage>(client, 'GetUser', { user_id: slow.userId }, slow.headers);
      await waitFor(() => hold.held, 5_000, 'the call in flight');

      const closing = atrium.close();
      await waitFor(
        () => watched.end !== undefined && followed.end !== undefined,
        5_000,
        'the streams to end',
      );
      expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING']);
      expect(watched.end?.code).toBe(status.OK);
      expect(followed.end?.code).toBe(status.OK);

      const refused = await unary(client, 'GetUser', { user_id: member.userId }, member.headers);
      expect(refused.error?.code).toBe(status.UNAVAILABLE);

      let closed = false;
      void closing.then(() => (closed = true));
      await new Promise((r) => setTimeout(r, 200));
      expect(closed).toBe(false);
      hold.release();
      const finished = await inFlight;
      expect(finished.error).toBeNull();
      expect(finished.value?.id).toBe(slow.userId);
      await closing;
    } finally {
      await atrium.stop();
    }
  });
});

describe('gRPC drain (SIGTERM to atrium serve)', () => {
  let database: TestDatabase;
  let dir: string | undefined;
  let url: string;
  beforeAll(async () => {
    if (testDialect() === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'atrium-grpc-serve-'));
      database = { url: `sqlite:${join(dir, 'atrium.db')}`, dialect: 'sqlite', drop: async () => undefined };
    } else database = await freshDatabase();
    url = database.url;
  });
  afterAll(async () => {
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('ends streams with status OK, reports NOT_SERVING, and exits 0', { timeout: 90_000 }, async () => {
    const services = await createServices(parseConfig({ NODE_ENV: 'test', DATABASE_URL: url }));
    const user = await services.core.users.create({ handle: 'drainer', email: 'drainer@example.com' });
    const { key } = await services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
    await closeServices(services);

    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--role', 'grpc'], {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        DATABASE_URL: url,
        HOST: '127.0.0.1',
        GRPC_PORT: '0',
        // It also answers /metrics over HTTP, on PORT (3000 by default, maybe taken on this machine).
        PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => /"grpc":"[^"]+"/.test(output), 60_000, 'atrium serve to start');
      const address = /"grpc":"([^"]+)"/.exec(output)![1]!;
      const users = userServiceClient(address);
      const health = healthClient(address);

      const watched = watchHealth(health, 'users.v1.UserService');
      const followed = follow(users, user.id, { 'x-api-key': key });
      await waitFor(() => watched.statuses.length > 0 && followed.started, 10_000, 'the streams');
      expect(watched.statuses).toEqual(['SERVING']);

      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      await waitFor(
        () => watched.end !== undefined && followed.end !== undefined,
        5_000,
        'the streams to end',
      );
      expect(watched.statuses).toEqual(['SERVING', 'NOT_SERVING']);
      expect(watched.end?.code).toBe(status.OK);
      expect(followed.end?.code).toBe(status.OK);
      expect(output).toContain('"msg":"stopped"');
      users.close();
      health.close();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
