import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpc, richStatus, startGrpcAtrium, unary, type GrpcAtrium } from './grpc/support.js';

/**
 * One email rule on every door (docs/grpc.md: "Rules (all from the core, as REST and GraphQL apply
 * them)"). REST used ajv-formats' own email format, the core another pattern: gRPC and GraphQL
 * stored `a..b@c.com`, `.a@b.com` and `a.@b.com`, which REST refused, and named the problem with
 * another code.
 */
describe('an email address and a name are valid or not alike over REST, GraphQL and gRPC', () => {
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

  const rest = async (email: string, field: 'email' | 'name' = 'email', userId = member.userId) => {
    const res = await fetch(`${atrium.httpUrl}/v1/users/${userId}`, {
      method: 'PATCH',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ [field]: email }),
    });
    const body = (await res.json()) as { details?: Array<{ field: string; code: string }> };
    return { status: res.status, codes: (body.details ?? []).map((d) => `${d.field}:${d.code}`) };
  };
  const graphql = async (email: string, field: 'email' | 'name' = 'email', userId = member.userId) => {
    const res = await fetch(`${atrium.httpUrl}/graphql`, {
      method: 'POST',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: `mutation($id: ID!, $value: String!) { updateUser(id: $id, input: { ${field}: $value }) { email } }`,
        variables: { id: userId, value: email },
      }),
    });
    const body = (await res.json()) as {
      data?: { updateUser: { email: string } | null };
      errors?: Array<{ extensions: { code: string; details?: Array<{ field: string; code: string }> } }>;
    };
    return body;
  };
  const viaGrpc = (email: string, field: 'email' | 'name' = 'email', userId = member.userId) =>
    unary(
      client,
      'UpdateUser',
      { user_id: userId, [field]: email, update_mask: { paths: [field] } },
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

  it('takes an address with combining accents (NFD) as the same address as its composed form (NFC)', async () => {
    const stamp = Date.now();
    const composed = `jos\u00e9.${stamp}@example.com`;
    const decomposed = `jose\u0301.${stamp}@example.com`;
    expect(composed).not.toBe(decomposed);
    expect((await rest(composed)).status).toBe(200);
    const other = await atrium.caller({ role: 'member' });
    expect(await rest(decomposed, 'email', other.userId)).toMatchObject({ status: 409 });
    expect((await graphql(decomposed, 'email', other.userId)).errors?.[0]?.extensions.code).toBe('CONFLICT');
    expect((await viaGrpc(decomposed, 'email', other.userId)).error?.code).toBe(grpc.status.ALREADY_EXISTS);
    // Stored composed, whichever form was sent.
    const third = await atrium.caller({ role: 'member' });
    const upper = `ZO\u0308E.${stamp}@example.com`;
    expect((await graphql(upper, 'email', third.userId)).data?.updateUser?.email).toBe(
      `z\u00f6e.${stamp}@example.com`,
    );
  });

  // A name that shows nothing is blank, on every door: white space and invisible format characters.
  it.each(['\u200b', ' \u200b\u200d ', '\ufeff', '\u2060\u00a0', '\u200e'])(
    'refuses the blank name %j on every door; nothing changes',
    async (name) => {
      const before = await atrium.services.core.users.get(member.userId);
      expect((await rest(name, 'name')).status).toBe(400);
      expect((await graphql(name, 'name')).errors?.[0]?.extensions.code).toBe('BAD_USER_INPUT');
      const { error } = await viaGrpc(name, 'name');
      expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => v.field)).toEqual(['name']);
      expect(await atrium.services.core.users.get(member.userId)).toEqual(before);
    },
  );

  it('still takes a name with a zero-width joiner inside it (an emoji sequence)', async () => {
    const { error } = await viaGrpc('Ada \u{1F469}\u200d\u{1F4BB}', 'name');
    expect(error ?? null).toBeNull();
  });
});
