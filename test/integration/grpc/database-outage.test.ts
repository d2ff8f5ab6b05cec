import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startAtriumBehindProxy,
  type AtriumBehindProxy,
} from '../../helpers/database-outage.js';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
import { collect, unary, userServiceClient, type Client } from './support.js';

const skip = await postgresMissing();

/**
 * A database that cannot be reached is a storage failure: INTERNAL (13), the spec's gRPC rule 3, on
 * every method and already at authentication (which reads the store). Its message is fixed, says the
 * call is worth retrying, carries no storage text, and a `retry-after` trailer goes with it
 * (docs/grpc.md, Errors).
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

  it.each(['API key', 'Bearer'])('unary calls answer INTERNAL, retry after 1 s, with an %s', async (kind) => {
    for (const [method, request] of [
      ['GetUser', { user_id: userId }],
      ['UpdateUser', { user_id: userId, name: 'Never Written', update_mask: { paths: ['name'] } }],
    ] as const) {
      const { error } = await unary(client, method, request, credentials[kind]);
      expect(error?.code, method).toBe(status.INTERNAL);
      expect(error?.details, method).toBe(STORE_UNAVAILABLE_MESSAGE);
      expect(error?.metadata.get('retry-after'), method).toEqual(['1']);
      noStorageText(error?.details);
    }
  });

  it.each(['ListUsers', 'StreamUserActivity'])('%s (a stream) ends with INTERNAL', async (method) => {
    const request = method === 'ListUsers' ? {} : { user_id: userId };
    const { error } = await collect(client, method, request, credentials['API key']);
    expect(error?.code).toBe(status.INTERNAL);
    expect(error?.details).toBe(STORE_UNAVAILABLE_MESSAGE);
    expect(error?.metadata.get('retry-after')).toEqual(['1']);
    noStorageText(error?.details);
  });
});
