import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startAtriumBehindProxy,
  type AtriumBehindProxy,
} from '../../helpers/database-outage.js';
import { collect, unary, userServiceClient, type Client } from './support.js';

const skip = await postgresMissing();

/**
 * docs/grpc.md maps the core's `unavailable` to UNAVAILABLE (14); a database that cannot be reached
 * is that, on every method and already at authentication (which reads the store), never INTERNAL.
 */
describe.skipIf(skip !== undefined)('gRPC when the database cannot be reached', () => {
  let env: AtriumBehindProxy;
  let client: Client;
  let userId: string;
  const credentials: Record<string, Record<string, string>> = {};

  beforeAll(async () => {
    env = await startAtriumBehindProxy({}, ['api', 'auth', 'grpc']);
    const { grpcAddress } = await env.atrium.listen();
    client = userServiceClient(grpcAddress!);
    const { services } = env.atrium;
    const user = await services.core.users.create({
      handle: 'outagegrpc',
      email: 'outagegrpc@example.com',
      name: 'Outage',
      role: 'admin',
    });
    userId = user.id;
    const key = await services.apiKeys.create({ userId, tier: 'enterprise' });
    const { token } = await services.oauth.tokens.issue({
      subject: userId,
      clientId: 'cli_outagegrpc',
      scope: ['profile:read', 'users:read', 'users:write'],
    });
    credentials['API key'] = { 'x-api-key': key.key };
    credentials.Bearer = { authorization: `Bearer ${token}` };
    expect((await unary(client, 'GetUser', { user_id: userId }, credentials['API key'])).error).toBeNull();
    await env.cutDatabase();
  });
  afterAll(async () => {
    client?.close();
    await env?.stop();
  });

  const noStorageText = (text: string | undefined) =>
    expect(text ?? '').not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres|terminat|Internal error/i);

  it.each(['API key', 'Bearer'])('unary calls answer UNAVAILABLE with an %s', async (kind) => {
    for (const [method, request] of [
      ['GetUser', { user_id: userId }],
      ['UpdateUser', { user_id: userId, name: 'Never Written', update_mask: { paths: ['name'] } }],
    ] as const) {
      const { error } = await unary(client, method, request, credentials[kind]);
      expect(error?.code, method).toBe(status.UNAVAILABLE);
      noStorageText(error?.details);
    }
  });

  it.each(['ListUsers', 'StreamUserActivity'])('%s (a stream) ends with UNAVAILABLE', async (method) => {
    const request = method === 'ListUsers' ? {} : { user_id: userId };
    const { error } = await collect(client, method, request, credentials['API key']);
    expect(error?.code).toBe(status.UNAVAILABLE);
    noStorageText(error?.details);
  });
});
