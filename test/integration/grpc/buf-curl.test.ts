import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bufCurl, bufMissing, grpc, startGrpcAtrium, type GrpcAtrium, REFLECTED_METHODS } from './support.js';

/**
 * `buf curl` is an independent client (Go, connect-go's gRPC) that knows nothing of the contract:
 * it learns the schema from server reflection, as grpcurl or Postman would.
 */
// On CI a missing buf fails the file; locally it skips and says why.
const noBuf = bufMissing();

const exitFor = (code: grpc.status) => code << 3;

describe.skipIf(noBuf !== undefined)('gRPC through buf curl and server reflection', () => {
  let atrium: GrpcAtrium;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    member = await atrium.caller({ role: 'member' });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('lists the services and methods from reflection, health included', async () => {
    const { code, stdout, stderr } = await bufCurl(atrium.address, '', ['--list-methods']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout.trim().split('\n').sort()).toEqual(REFLECTED_METHODS);
  });

  it('lists every service it answers, reflection itself included, and reflection describes itself', async () => {
    const { code, stdout, stderr } = await bufCurl(atrium.address, '', ['--list-services']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout.trim().split('\n').sort()).toEqual([
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
      'users.v1.UserService',
    ]);
    // buf curl can call a service only once reflection resolved its request and response types:
    // each reflection version, described by reflection, answers a ListServices asked through it.
    for (const version of ['v1', 'v1alpha']) {
      const call = await bufCurl(
        atrium.address,
        `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
        ['-d', '{"list_services":"*"}'],
      );
      expect(call.stderr).toBe('');
      expect(call.code).toBe(0);
      const answer = JSON.parse(call.stdout) as { listServicesResponse: { service: { name: string }[] } };
      expect(answer.listServicesResponse.service.map((s) => s.name)).toContain(
        `grpc.reflection.${version}.ServerReflection`,
      );
    }
  });

  it('checks health without credentials', async () => {
    const { code, stdout } = await bufCurl(atrium.address, '/grpc.health.v1.Health/Check', [
      '-d',
      '{"service":"users.v1.UserService"}',
    ]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ status: 'SERVING' });
  });

  it('calls GetUser with x-api-key metadata', async () => {
    const { code, stdout } = await bufCurl(atrium.address, '/users.v1.UserService/GetUser', [
      '-H',
      `x-api-key: ${member.key}`,
      '-d',
      JSON.stringify({ user_id: member.userId }),
    ]);
    expect(code).toBe(0);
    const user = await atrium.services.core.users.get(member.userId);
    expect(JSON.parse(stdout)).toEqual({
      id: member.userId,
      name: user.name,
      email: user.email,
      role: 'member',
      createdAt: String(Math.floor(Date.parse(user.createdAt) / 1000)),
      organizationId: user.organizationId,
    });
  });

  it('resolves google.protobuf.FieldMask through reflection: UpdateUser with update_mask', async () => {
    const { code, stdout, stderr } = await bufCurl(atrium.address, '/users.v1.UserService/UpdateUser', [
      '-H',
      `x-api-key: ${member.key}`,
      '-d',
      JSON.stringify({
        user_id: member.userId,
        name: 'Buf Curl',
        email: 'ignored@example.com',
        update_mask: 'name',
      }),
    ]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ id: member.userId, name: 'Buf Curl' });
    expect((await atrium.services.core.users.get(member.userId)).email).not.toBe('ignored@example.com');
  });

  it('sees the error codes: UNAUTHENTICATED, INVALID_ARGUMENT with BadRequest details, NOT_FOUND', async () => {
    const none = await bufCurl(atrium.address, '/users.v1.UserService/GetUser', ['-d', '{"user_id":"x"}']);
    expect(none.code).toBe(exitFor(grpc.status.UNAUTHENTICATED));
    expect(JSON.parse(none.stderr)).toMatchObject({ code: 'unauthenticated' });

    const mask = await bufCurl(atrium.address, '/users.v1.UserService/UpdateUser', [
      '-H',
      `x-api-key: ${member.key}`,
      '-d',
      JSON.stringify({ user_id: member.userId, update_mask: 'nickname' }),
    ]);
    expect(mask.code).toBe(exitFor(grpc.status.INVALID_ARGUMENT));
    const body = JSON.parse(mask.stderr) as { code: string; details: { type: string }[] };
    expect(body.code).toBe('invalid_argument');
    expect(body.details.map((d) => d.type)).toEqual(['google.rpc.BadRequest']);

    const badToken = await bufCurl(atrium.address, '/users.v1.UserService/GetUser', [
      '-H',
      `authorization: Bearer ${'x'.repeat(10)}`,
      '-d',
      '{"user_id":"usr_00000000000000000000000000"}',
    ]);
    expect(badToken.code).toBe(exitFor(grpc.status.UNAUTHENTICATED));
    const notFound = await bufCurl(atrium.address, '/users.v1.UserService/GetUser', [
      '-H',
      `x-api-key: ${member.key}`,
      '-d',
      '{"user_id":"usr_00000000000000000000000000"}',
    ]);
    expect(notFound.code).toBe(exitFor(grpc.status.NOT_FOUND));
  });

  it('reads a ListUsers stream with limit', async () => {
    await atrium.caller();
    await atrium.caller();
    const { code, stdout } = await bufCurl(atrium.address, '/users.v1.UserService/ListUsers', [
      '-H',
      `x-api-key: ${member.key}`,
      '-d',
      '{"limit":2}',
    ]);
    expect(code).toBe(0);
    // One JSON document per message.
    const ids = [...stdout.matchAll(/"id": "(usr_[^"]+)"/g)].map((m) => m[1]);
    const expected = (await atrium.services.core.users.page(SYSTEM_ACTOR, { limit: 2 })).map((u) => u.id);
    expect(ids).toEqual(expected);
  });
});
