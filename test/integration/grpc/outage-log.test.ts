import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
import {
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
  REQUEST_OUTAGE_LINE,
  REQUEST_BACK_LINE,
  noted,
  poolEmptied,
} from '../../helpers/database-outage.js';
import { memoryLog } from '../../helpers/memory-log.js';
import { collect, unary, userServiceClient, type Client } from './support.js';

const skip = await postgresMissing();

const OUTAGE = REQUEST_OUTAGE_LINE;
const BACK = REQUEST_BACK_LINE;

/**
 * docs/deployment.md, "What is logged while PostgreSQL is away": a gRPC call that meets a database
 * outage answers INTERNAL with its fixed message (docs/grpc.md), and the outage is logged once by
 * the process (a warning with the driver's message and code, no stack) and its end once, not once
 * per call. A grpc-js client, over a socket, against PostgreSQL behind a proxy the test cuts.
 */
describe.skipIf(skip !== undefined)('the gRPC log while PostgreSQL is unreachable', () => {
  const log = memoryLog('info');
  let behind: ListeningBehindProxy;
  let client: Client;
  let userId: string;
  let headers: Record<string, string>;

  beforeAll(async () => {
    behind = await startListeningBehindProxy({}, ['grpc'], { logger: log.logger });
    client = userServiceClient(behind.grpcAddress!);
    const { services } = behind.atrium;
    const user = await services.core.users.create({
      handle: 'outagegrpclog',
      email: 'outagegrpclog@example.com',
      name: 'Outage',
      role: 'admin',
    });
    userId = user.id;
    headers = { 'x-api-key': (await services.apiKeys.create({ userId, tier: 'enterprise' })).key };
  });
  afterAll(async () => {
    client?.close();
    await behind?.stop();
  });

  it('logs the outage once, with its code and no stack, and its end once, however many calls meet it', async () => {
    expect((await unary(client, 'GetUser', { user_id: userId }, headers)).error).toBeNull();
    const before = log.lines.length;
    await behind.cutDatabase();
    await poolEmptied(behind.atrium.services.store);

    for (let i = 0; i < 5; i++) {
      const { error } = await unary(
        client,
        'GetUser',
        { user_id: userId },
        { ...headers, 'x-request-id': `req-outage-${i}` },
      );
      expect(error?.code).toBe(status.INTERNAL);
      expect(error?.details).toBe(STORE_UNAVAILABLE_MESSAGE);
      expect(error?.metadata.get('x-request-id')).toEqual([`req-outage-${i}`]);
    }
    const listing = await collect(client, 'ListUsers', {}, headers);
    expect(listing.error?.code).toBe(status.INTERNAL);
    expect(listing.error?.details).toBe(STORE_UNAVAILABLE_MESSAGE);

    const during = noted(log.lines.slice(before));
    expect(during.map((l) => l.msg)).toEqual([OUTAGE]);
    expect(during[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED' });
    expect(during[0]!.err).toMatch(/ECONNREFUSED/);
    expect(JSON.stringify(during)).not.toContain('stack');

    await behind.restoreDatabase();
    expect((await unary(client, 'GetUser', { user_id: userId }, headers)).error).toBeNull();
    const after = noted(log.lines.slice(before));
    expect(after.map((l) => l.msg)).toEqual([OUTAGE, BACK]);
    expect(after[1]).toMatchObject({ level: 40, failures: 6 });
  }, 30_000);
});
