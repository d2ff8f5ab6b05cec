import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpc, richStatus, startGrpcAtrium, unary, type GrpcAtrium } from './grpc/support.js';

/**
 * One email rule on every door (docs/grpc.md: "Rules (all from the core, as REST and GraphQL apply
 * them)"). REST used ajv-formats' own email format, the core another pattern: gRPC and GraphQL
 * stored `a..b@c.com`, `.a@b.com` and `a.@b.com`, which REST refused, and named the problem with
 * another code.
 */
describe('an email address is valid or not alike over REST, GraphQL and gRPC', () => {
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  let admin: Awaited<ReturnType<GrpcAtrium['caller']>>;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    client = atrium.client();
    admin = await atrium.caller({ role: 'admin' });
    member = await atrium.caller({ role: 'member' });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  const rest = async (email: string) => {
    const res = await fetch(`${atrium.httpUrl}/v1/users/${member.userId}`, {
      method: 'PATCH',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ email }),
    });
    const body = (await res.json()) as { details?: Array<{ field: string; code: string }> };
    return { status: res.status, codes: (body.details ?? []).map((d) => `${d.field}:${d.code}`) };
  };
  const graphql = async (email: string) => {
    const res = await fetch(`${atrium.httpUrl}/graphql`, {
      method: 'POST',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        query:
          'mutation($id: ID!, $email: String!) { updateUser(id: $id, input: { email: $email }) { email } }',
        variables: { id: member.userId, email },
      }),
    });
    const body = (await res.json()) as {
      data?: { updateUser: { email: string } | null };
      errors?: Array<{ extensions: { code: string; details?: Array<{ field: string; code: string }> } }>;
    };
    return body;
  };
  const viaGrpc = (email: string) =>
    unary(
      client,
      'UpdateUser',
      { user_id: member.userId, email, update_mask: { paths: ['email'] } },
      admin.headers,
    );

  it.each(['a..b@example.com', '.a@example.com', 'a.@example.com', 'a b@example.com', 'a@example'])(
    'refuses %s on every door with invalid_format',
    async (email) => {
      expect(await rest(email)).toEqual({ status: 400, codes: ['email:invalid_format'] });
      const gql = await graphql(email);
      expect(gql.data?.updateUser ?? null).toBeNull();
      expect(gql.errors?.[0]?.extensions.code).toBe('BAD_USER_INPUT');
      const { error } = await viaGrpc(email);
      expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => `${v.field}:${v.reason}`)).toEqual([
        'email:invalid_format',
      ]);
    },
  );

  it('accepts the same addresses on every door', async () => {
    const stamp = Date.now();
    expect((await rest(`first.last+${stamp}@example.com`)).status).toBe(200);
    expect((await graphql(`o'brien.${stamp}@example.com`)).data?.updateUser?.email).toBe(
      `o'brien.${stamp}@example.com`,
    );
    const { error } = await viaGrpc(`ünï.${stamp}@example.com`);
    expect(error ?? null).toBeNull();
    expect((await rest(`ünï2.${stamp}@example.com`)).status).toBe(200);
  });
});
