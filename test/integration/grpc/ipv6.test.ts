import { afterAll, describe, expect, it } from 'vitest';
import { type GrpcAtrium, startGrpcAtrium, unary, type UserMessage } from './support.js';

// HOST=::1 was refused for the grpc role ("an address of this machine (EADDRNOTAVAIL)") while the
// HTTP listener took it: grpc-js reads an IPv6 address only in brackets.
describe('gRPC on an IPv6 HOST', () => {
  let atrium: GrpcAtrium;
  afterAll(async () => {
    await atrium?.stop();
  });

  it('listens on [::1] and a grpc-js client reaches it there', async () => {
    atrium = await startGrpcAtrium({ HOST: '::1' });
    expect(atrium.address).toMatch(/^\[::1\]:\d+$/);
    const { error, value } = await unary<{ status: string }>(atrium.health(), 'Check', { service: '' });
    expect(error).toBeNull();
    expect(value?.status).toBe('SERVING');
    const member = await atrium.caller();
    const user = await unary<UserMessage>(
      atrium.client(),
      'GetUser',
      { user_id: member.userId },
      member.headers,
    );
    expect(user.error).toBeNull();
    expect(user.value?.id).toBe(member.userId);
  });
});
