import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresMissing,
  startListeningBehindProxy,
  type ListeningBehindProxy,
} from '../../helpers/database-outage.js';
import { STORE_UNAVAILABLE_MESSAGE } from '../../../src/store/errors.js';
import { bufCurl, bufMissing, bufVerboseReceived, grpc, REFLECTED_METHODS } from './support.js';

// On CI each throws, failing the file, when its prerequisite is missing; locally they skip and say why.
const pgMissing = await postgresMissing();
const noBuf = bufMissing();

const GET_USER = 'users.v1.UserService/GetUser';
/** What the server must never send a client: the driver's words, the database's address, the cause. */
const STORAGE_TEXT = /ECONNREFUSED|ECONNRESET|127\.0\.0\.1|:5432|postgres|pg_|sql|terminat|Internal error/i;

/**
 * docs/grpc.md, Errors: during a database outage a call answers INTERNAL with the fixed
 * retry-shortly message and a `retry-after: 1` trailer, no storage text, as `buf curl` (an
 * independent Go client that learns the schema by server reflection) shows it to a person at a
 * terminal. Reflection needs no database, so it keeps working meanwhile; once the database is back,
 * the same command succeeds. PostgreSQL is reached through a TCP proxy the test cuts.
 */
describe.skipIf(pgMissing !== undefined || noBuf !== undefined)(
  'gRPC through buf curl while the database cannot be reached',
  () => {
    let env: ListeningBehindProxy;
    let address: string;
    let userId: string;
    let getUser: (extra?: string[]) => ReturnType<typeof bufCurl>;

    beforeAll(async () => {
      env = await startListeningBehindProxy({}, ['api', 'auth', 'grpc']);
      address = env.grpcAddress!;
      const { services } = env.atrium;
      const user = await services.core.users.create({
        handle: 'outagebufcurl',
        email: 'outagebufcurl@example.com',
        name: 'Buf Outage',
        role: 'member',
      });
      userId = user.id;
      const key = (await services.apiKeys.create({ userId, tier: 'enterprise' })).key;
      getUser = (extra = []) =>
        bufCurl(address, `/${GET_USER}`, [
          ...extra,
          '-H',
          `x-api-key: ${key}`,
          '-d',
          JSON.stringify({ user_id: userId }),
        ]);
    });
    afterAll(async () => {
      await env?.restoreDatabase().catch(() => undefined);
      await env?.stop();
    });

    it('GetUser answers internal with the retry message and retry-after, reflection still works, then succeeds again', async () => {
      const before = await getUser();
      expect(before.stderr).toBe('');
      expect(before.code).toBe(0);

      await env.cutDatabase();

      // What a person sees without -v: buf curl's error document and its exit code (13 << 3).
      const failed = await getUser();
      expect(failed.code).toBe(grpc.status.INTERNAL << 3);
      expect(failed.stdout).toBe('');
      expect(JSON.parse(failed.stderr)).toEqual({ code: 'internal', message: STORE_UNAVAILABLE_MESSAGE });
      expect(failed.stderr).not.toMatch(STORAGE_TEXT);

      // With -v buf curl prints what the server sent: the status's block (trailers-only here) carries
      // the retry-after trailer, and nothing the server sent on the call names the storage.
      const verbose = await getUser(['-v']);
      expect(verbose.code).toBe(grpc.status.INTERNAL << 3);
      const received = bufVerboseReceived(verbose.stderr, GET_USER);
      const status = received.find((block) => 'grpc-status' in block);
      expect(status, verbose.stderr).toBeDefined();
      expect(status!['grpc-status']).toBe(String(grpc.status.INTERNAL));
      expect(decodeURIComponent(status!['grpc-message'] ?? '')).toBe(STORE_UNAVAILABLE_MESSAGE);
      expect(status!['retry-after']).toBe('1');
      expect(status!['x-request-id']).toMatch(/^req_/);
      expect(JSON.stringify(received)).not.toMatch(STORAGE_TEXT);
      // The schema came by reflection, during the outage, on the same command.
      expect(verbose.stderr).toContain('Server reflection has resolved file "users/v1/users.proto"');

      // Reflection on its own: every service and method, as when the database is there.
      const listed = await bufCurl(address, '', ['--list-methods']);
      expect(listed.stderr).toBe('');
      expect(listed.code).toBe(0);
      expect(listed.stdout.trim().split('\n').sort()).toEqual(REFLECTED_METHODS);

      await env.restoreDatabase();

      // The same command, with no restart: the pool connects again by itself.
      const after = await getUser();
      expect(after.stderr).toBe('');
      expect(after.code).toBe(0);
      expect(JSON.parse(after.stdout)).toMatchObject({ id: userId, name: 'Buf Outage', role: 'member' });
    }, 60_000);
  },
);
