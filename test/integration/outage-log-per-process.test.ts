import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
  REQUEST_OUTAGE_LINE,
  REQUEST_BACK_LINE,
  noted,
  poolEmptied,
} from '../helpers/database-outage.js';
import { memoryLog } from '../helpers/memory-log.js';
import { codesOf, runOver } from './graphql/transports.js';
import { unary, userServiceClient, type Client } from './grpc/support.js';

const skip = await postgresMissing();

const OUTAGE = REQUEST_OUTAGE_LINE;
const BACK = REQUEST_BACK_LINE;

/**
 * docs/deployment.md, "What is logged while PostgreSQL is away": one outage, one pair of lines per
 * process, whichever request-serving surfaces meet it. One process with the api, auth and grpc
 * roles; REST, the token server, GraphQL (a resolver and a credential check) and gRPC all meet the
 * same outage (PostgreSQL behind a proxy the test cuts), each through a real client over a socket.
 */
describe.skipIf(skip !== undefined)('one outage log for every surface of a process', () => {
  const log = memoryLog('info');
  let behind: ListeningBehindProxy;
  let grpc: Client;
  let userId: string;
  let apiKey: string;
  let client: { id: string; secret: string };

  beforeAll(async () => {
    behind = await startListeningBehindProxy({}, ['api', 'auth', 'grpc'], { logger: log.logger });
    grpc = userServiceClient(behind.grpcAddress!);
    const { services } = behind.atrium;
    const user = await services.core.users.create({
      handle: 'outageeverysurface',
      email: 'outageeverysurface@example.com',
      name: 'Outage',
      role: 'admin',
    });
    userId = user.id;
    apiKey = (await services.apiKeys.create({ userId, tier: 'enterprise' })).key;
    const created = await services.oauth.clients.create({ name: 'Job', scopes: 'profile:read' });
    client = { id: created.client_id, secret: created.client_secret! };
  });
  afterAll(async () => {
    grpc?.close();
    await behind?.stop();
  });

  const rest = () => fetch(`${behind.httpUrl}/api/v2/orders`, { headers: { 'x-api-key': apiKey } });
  const token = () =>
    fetch(`${behind.httpUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    });
  const graphql = (query: string, withKey: boolean) =>
    runOver('POST', behind.httpUrl, { query }, withKey ? { 'x-api-key': apiKey } : {});
  const getUser = () => unary(grpc, 'GetUser', { user_id: userId }, { 'x-api-key': apiKey });

  it('logs the outage once and its end once when REST, the token server, GraphQL and gRPC all meet it', async () => {
    expect((await getUser()).error).toBeNull();
    const before = log.lines.length;
    await behind.cutDatabase();
    await poolEmptied(behind.atrium.services.store);

    for (let round = 0; round < 2; round++) {
      expect((await getUser()).error?.code).toBe(status.INTERNAL);
      const restAnswer = await rest();
      expect(restAnswer.status).toBe(503);
      expect(await restAnswer.json()).toMatchObject({ error: 'service_unavailable' });
      const tokenAnswer = await token();
      expect(tokenAnswer.status).toBe(503);
      expect(await tokenAnswer.json()).toMatchObject({ error: 'temporarily_unavailable' });
      // An anonymous read meets the outage in its resolver; a key meets it at the credential check.
      expect(codesOf(await graphql('{ posts(first: 1) { totalCount } }', false))).toEqual([
        'SERVICE_UNAVAILABLE',
      ]);
      expect(codesOf(await graphql('{ me { id } }', true))).toEqual(['SERVICE_UNAVAILABLE']);
    }

    const during = noted(log.lines.slice(before));
    expect(during.map((l) => l.msg)).toEqual([OUTAGE]);
    expect(during[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED' });
    expect(JSON.stringify(during)).not.toContain('stack');

    await behind.restoreDatabase();
    expect((await getUser()).error).toBeNull();
    expect((await rest()).status).toBe(200);
    expect((await graphql('{ me { id } }', true)).data).toEqual({ me: { id: userId } });
    expect(noted(log.lines.slice(before)).map((l) => l.msg)).toEqual([OUTAGE, BACK]);
  }, 30_000);
});
