import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueOperatorTokens } from '../../../src/oauth/cli.js';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { MALFORMED_KEY } from '../../helpers/credentials.js';
import { testDialect } from '../../helpers/database.js';
import { grpc, richStatus, startGrpcAtrium, unary, type GrpcAtrium, type UserMessage } from './support.js';

/** What a repeated REST user read answers: PostgreSQL without Redis keeps no user cache (docs/rest.md). */
const HIT = testDialect() === 'sqlite' ? 'HIT' : 'MISS';

const { status } = grpc;

describe('gRPC users.v1.UserService: GetUser and UpdateUser', () => {
  let atrium: GrpcAtrium;
  let client: ReturnType<GrpcAtrium['client']>;
  let admin: Awaited<ReturnType<GrpcAtrium['caller']>>;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  let other: Awaited<ReturnType<GrpcAtrium['caller']>>;

  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    client = atrium.client();
    admin = await atrium.caller({ role: 'admin' });
    member = await atrium.caller({ role: 'member' });
    other = await atrium.caller({ role: 'member' });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  describe('GetUser', () => {
    const getUser = (userId: string, headers: Record<string, string>) =>
      unary<UserMessage>(client, 'GetUser', { user_id: userId }, headers);

    it('answers the caller their own user, created_at in Unix seconds, with x-request-id', async () => {
      const { error, value, headers } = await unary<UserMessage>(
        client,
        'GetUser',
        { user_id: member.userId },
        { ...member.headers, 'x-request-id': 'trace-get-1' },
      );
      expect(error).toBeNull();
      const user = await atrium.services.core.users.get(member.userId);
      expect(value).toEqual({
        id: member.userId,
        name: user.name,
        email: user.email,
        role: 'member',
        created_at: Math.floor(Date.parse(user.createdAt) / 1000),
        organization_id: user.organizationId,
      });
      expect(headers?.get('x-request-id')).toEqual(['trace-get-1']);
      expect(headers?.get('x-ratelimit-limit')).toEqual(['100000']);
    });

    it('lets an admin read another user', async () => {
      const { error, value } = await getUser(member.userId, admin.headers);
      expect(error).toBeNull();
      expect(value?.id).toBe(member.userId);
    });

    it("reads the store once for the caller's own user (the key lookup), twice for someone else", async () => {
      const statements = async (userId: string, headers: Record<string, string>) => {
        const before = atrium.services.store.statementCount();
        const { error, value } = await getUser(userId, headers);
        expect(error).toBeNull();
        expect(value?.id).toBe(userId);
        return atrium.services.store.statementCount() - before;
      };
      // Warm: a key's first use may write last_used_at (at most once a minute).
      await statements(member.userId, member.headers);
      await statements(member.userId, admin.headers);
      expect(await statements(member.userId, member.headers)).toBe(1);
      expect(await statements(member.userId, admin.headers)).toBe(2);
    });

    it("answers from this call's own authentication, so a change made between calls is seen at once", async () => {
      const self = { id: member.userId, kind: 'user' as const, role: 'member' as const };
      for (const name of ['Fresh One', 'Fresh Two']) {
        await atrium.services.core.users.updateSelfService(self, member.userId, { name });
        const { error, value } = await getUser(member.userId, member.headers);
        expect(error).toBeNull();
        expect(value?.name).toBe(name);
      }
    });

    it('refuses the caller as soon as their user is deleted: nothing answers from an earlier call', async () => {
      const gone = await atrium.caller({ role: 'member' });
      await atrium.services.core.users.delete(SYSTEM_ACTOR, gone.userId);
      const { error } = await getUser(gone.userId, gone.headers);
      expect(error?.code).toBe(status.UNAUTHENTICATED);
    });

    it('refuses an empty user_id with INVALID_ARGUMENT and a field violation', async () => {
      const { error } = await unary(client, 'GetUser', { user_id: '' }, member.headers);
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations).toEqual([
        { field: 'user_id', description: 'user_id is required', reason: 'required' },
      ]);
    });

    it('answers NOT_FOUND for an unknown user and for a deleted one', async () => {
      const unknown = await unary(
        client,
        'GetUser',
        { user_id: 'usr_00000000000000000000000000' },
        admin.headers,
      );
      expect(unknown.error?.code).toBe(status.NOT_FOUND);
      const gone = await atrium.caller({ role: 'member' });
      await atrium.services.core.users.delete(SYSTEM_ACTOR, gone.userId);
      const deleted = await unary(client, 'GetUser', { user_id: gone.userId }, admin.headers);
      expect(deleted.error?.code).toBe(status.NOT_FOUND);
      // The deleted user's own key stops working too.
      const own = await unary(client, 'GetUser', { user_id: gone.userId }, gone.headers);
      expect(own.error?.code).toBe(status.UNAUTHENTICATED);
    });

    it('answers NOT_FOUND without repeating an id that cannot be one, however long (no hang)', async () => {
      // 500k characters fit the 1 MiB request limit, but not a status: echoed into grpc-message
      // the trailers were too large and the client never got a status.
      for (const userId of ['nope', 'usr_' + 'a'.repeat(1_000), 'usr_' + 'a'.repeat(500_000)]) {
        const { error } = await unary(client, 'GetUser', { user_id: userId }, admin.headers, {
          deadline: Date.now() + 30_000,
        });
        expect(error?.code, userId.slice(0, 10)).toBe(status.NOT_FOUND);
        expect(error?.details).toBe('User not found.');
      }
      // A well-formed id is 30 characters: it is named.
      const wellFormed = 'usr_00000000000000000000000000';
      const { error } = await unary(client, 'GetUser', { user_id: wellFormed }, admin.headers);
      expect(error?.details).toBe(`User ${wellFormed} not found.`);
    });

    it('answers PERMISSION_DENIED to a member reading someone else', async () => {
      const { error } = await unary(client, 'GetUser', { user_id: other.userId }, member.headers);
      expect(error?.code).toBe(status.PERMISSION_DENIED);
      expect(error?.details).toBe('You may read only your own user record.');
    });

    it('answers UNAUTHENTICATED without credentials and with bad ones', async () => {
      const none = await unary(client, 'GetUser', { user_id: member.userId });
      expect(none.error?.code).toBe(status.UNAUTHENTICATED);
      const badKey = await unary(
        client,
        'GetUser',
        { user_id: member.userId },
        { 'x-api-key': MALFORMED_KEY },
      );
      expect(badKey.error?.code).toBe(status.UNAUTHENTICATED);
      const badToken = await unary(
        client,
        'GetUser',
        { user_id: member.userId },
        { authorization: 'Bearer abc.def.ghi' },
      );
      expect(badToken.error?.code).toBe(status.UNAUTHENTICATED);
      const notBearer = await unary(
        client,
        'GetUser',
        { user_id: member.userId },
        { authorization: 'Basic Zm9vOmJhcg==' },
      );
      expect(notBearer.error?.code).toBe(status.UNAUTHENTICATED);
    });

    it('accepts an OAuth access token as authorization: Bearer, and checks its scope', async () => {
      const granted = await issueOperatorTokens(atrium.services, {
        userId: member.userId,
        scopes: 'users:read',
      });
      const ok = await unary<UserMessage>(
        client,
        'GetUser',
        { user_id: member.userId },
        { authorization: `Bearer ${granted.access_token}` },
      );
      expect(ok.error).toBeNull();
      expect(ok.value?.id).toBe(member.userId);

      const narrow = await issueOperatorTokens(atrium.services, {
        userId: member.userId,
        scopes: 'profile:read',
      });
      const denied = await unary(
        client,
        'GetUser',
        { user_id: member.userId },
        { authorization: `Bearer ${narrow.access_token}` },
      );
      expect(denied.error?.code).toBe(status.PERMISSION_DENIED);
      expect(denied.error?.details).toBe('This request needs the scope "users:read".');
    });

    it('counts calls in the shared rate limiter and answers RESOURCE_EXHAUSTED over the limit', async () => {
      const free = await atrium.caller({ role: 'member', tier: 'free' });
      // The same window REST uses: fill it through the limiter the way 99 earlier calls would have.
      for (let i = 0; i < 99; i++) await atrium.services.limiter.hit(`rest:key:${free.keyId}`, 100, 3600);
      const last = await unary(client, 'GetUser', { user_id: free.userId }, free.headers);
      expect(last.error).toBeNull();
      expect(last.headers?.get('x-ratelimit-remaining')).toEqual(['0']);
      const over = await unary(client, 'GetUser', { user_id: free.userId }, free.headers);
      expect(over.error?.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(Number(over.error?.metadata.get('retry-after')[0])).toBeGreaterThanOrEqual(1);
      // REST shares the window: the same key is refused there as well.
      const rest = await fetch(`${atrium.httpUrl}/v1/users/${free.userId}`, { headers: free.headers });
      expect(rest.status).toBe(429);
    });
  });

  describe('UpdateUser', () => {
    it('changes only the fields named in update_mask', async () => {
      const before = await atrium.services.core.users.get(member.userId);
      const { error, value } = await unary<UserMessage>(
        client,
        'UpdateUser',
        {
          user_id: member.userId,
          name: 'Ada Lovelace',
          email: 'ignored@example.com',
          role: 'admin',
          update_mask: { paths: ['name'] },
        },
        member.headers,
      );
      expect(error).toBeNull();
      expect(value).toMatchObject({
        id: member.userId,
        name: 'Ada Lovelace',
        email: before.email,
        role: 'member',
      });
      const after = await atrium.services.core.users.get(member.userId);
      expect(after).toMatchObject({
        firstName: 'Ada',
        lastName: 'Lovelace',
        email: before.email,
        role: 'member',
      });
    });

    it('lets a member change their own email', async () => {
      const email = `new-${member.userId}@example.com`;
      const { error, value } = await unary<UserMessage>(
        client,
        'UpdateUser',
        { user_id: member.userId, email: email.toUpperCase(), update_mask: { paths: ['email'] } },
        member.headers,
      );
      expect(error).toBeNull();
      expect(value?.email).toBe(email);
    });

    it('refuses an unknown mask path with INVALID_ARGUMENT naming it', async () => {
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: member.userId, name: 'X Y', update_mask: { paths: ['name', 'password'] } },
        member.headers,
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations).toEqual([
        {
          field: 'update_mask.paths',
          description: 'unknown field "password" in update_mask; updatable fields: name, email, role',
          reason: 'unknown_field',
        },
      ]);
      expect((await atrium.services.core.users.get(member.userId)).name).toBe('Ada Lovelace');
    });

    it('refuses a missing or empty update_mask', async () => {
      for (const mask of [undefined, { paths: [] }]) {
        const { error } = await unary(
          client,
          'UpdateUser',
          { user_id: member.userId, name: 'X Y', ...(mask ? { update_mask: mask } : {}) },
          member.headers,
        );
        expect(error?.code).toBe(status.INVALID_ARGUMENT);
        expect(richStatus(error!).fieldViolations.map((v) => v.field)).toEqual(['update_mask']);
      }
    });

    it('reports every invalid value as a field violation (blank name, bad email, unknown role)', async () => {
      const { error } = await unary(
        client,
        'UpdateUser',
        {
          user_id: member.userId,
          name: '   ',
          email: 'not-an-email',
          role: 'owner',
          update_mask: { paths: ['name', 'email', 'role'] },
        },
        admin.headers,
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      const violations = richStatus(error!).fieldViolations;
      expect(violations.map((v) => [v.field, v.reason])).toEqual([
        ['name', 'range_error'],
        ['email', 'invalid_format'],
        ['role', 'invalid_enum'],
      ]);
      expect(violations[0]!.description).toBe('name must not be blank');
      expect((await atrium.services.core.users.get(member.userId)).name).toBe('Ada Lovelace');
    });

    it('refuses an email holding an invisible character, which would show as another address', async () => {
      const before = (await atrium.services.core.users.get(member.userId)).email;
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: member.userId, email: `x\u200b${before}`, update_mask: { paths: ['email'] } },
        admin.headers,
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => [v.field, v.reason])).toEqual([
        ['email', 'invalid_format'],
      ]);
      expect((await atrium.services.core.users.get(member.userId)).email).toBe(before);
    });

    it('reports the request problems and the value problems together, once each', async () => {
      const { error } = await unary(
        client,
        'UpdateUser',
        {
          user_id: '',
          name: '',
          email: 'x',
          role: 'q',
          update_mask: { paths: ['name', 'email', 'role', 'zzz'] },
        },
        admin.headers,
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => [v.field, v.reason])).toEqual([
        ['user_id', 'required'],
        ['update_mask.paths', 'unknown_field'],
        ['name', 'range_error'],
        ['email', 'invalid_format'],
        ['role', 'invalid_enum'],
      ]);
    });

    it('keeps the status short however many or long the unknown mask paths are', async () => {
      const long = 'p'.repeat(100_000);
      const many = Array.from({ length: 50_000 }, (_, i) => `f${i}`);
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: member.userId, name: 'A B', update_mask: { paths: ['name', long, ...many] } },
        admin.headers,
        { deadline: Date.now() + 10_000 },
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      const violations = richStatus(error!).fieldViolations;
      expect(violations.every((v) => v.field === 'update_mask.paths')).toBe(true);
      expect(violations.length).toBeLessThanOrEqual(11);
      expect(violations.at(-1)!.description).toMatch(/and 49991 more unknown fields/);
      expect(JSON.stringify(violations).length).toBeLessThan(4_000);
    });

    it('refuses an empty user_id with INVALID_ARGUMENT', async () => {
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: '', name: 'A B', update_mask: { paths: ['name'] } },
        admin.headers,
      );
      expect(error?.code).toBe(status.INVALID_ARGUMENT);
      expect(richStatus(error!).fieldViolations.map((v) => v.field)).toEqual(['user_id']);
    });

    it('answers PERMISSION_DENIED to a member changing their own role or another user', async () => {
      const role = await unary(
        client,
        'UpdateUser',
        { user_id: member.userId, role: 'admin', update_mask: { paths: ['role'] } },
        member.headers,
      );
      expect(role.error?.code).toBe(status.PERMISSION_DENIED);
      expect(role.error?.details).toBe('Only an admin may change a role.');
      const another = await unary(
        client,
        'UpdateUser',
        { user_id: other.userId, name: 'Not Mine', update_mask: { paths: ['name'] } },
        member.headers,
      );
      expect(another.error?.code).toBe(status.PERMISSION_DENIED);
      expect((await atrium.services.core.users.get(member.userId)).role).toBe('member');
      expect((await atrium.services.core.users.get(other.userId)).name).not.toBe('Not Mine');
    });

    it('lets an admin change a role; a viewer key lacks users:write', async () => {
      const viewer = await atrium.caller({ role: 'viewer' });
      const { error, value } = await unary<UserMessage>(
        client,
        'UpdateUser',
        { user_id: viewer.userId, role: 'member', update_mask: { paths: ['role'] } },
        admin.headers,
      );
      expect(error).toBeNull();
      expect(value?.role).toBe('member');
      const stillViewer = await atrium.caller({ role: 'viewer' });
      const denied = await unary(
        client,
        'UpdateUser',
        { user_id: stillViewer.userId, name: 'V W', update_mask: { paths: ['name'] } },
        stillViewer.headers,
      );
      expect(denied.error?.code).toBe(status.PERMISSION_DENIED);
      expect(denied.error?.details).toBe('This request needs the scope "users:write".');
    });

    it('answers ALREADY_EXISTS when the email belongs to another user', async () => {
      const taken = (await atrium.services.core.users.get(other.userId)).email;
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: member.userId, email: taken, update_mask: { paths: ['email'] } },
        member.headers,
      );
      expect(error?.code).toBe(status.ALREADY_EXISTS);
    });

    it('answers NOT_FOUND for an unknown user', async () => {
      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: 'usr_00000000000000000000000000', name: 'A B', update_mask: { paths: ['name'] } },
        admin.headers,
      );
      expect(error?.code).toBe(status.NOT_FOUND);
    });

    it('is seen by the next REST read, whose cached copy it invalidates', async () => {
      const url = `${atrium.httpUrl}/v1/users/${other.userId}`;
      const first = await fetch(url, { headers: other.headers });
      const second = await fetch(url, { headers: other.headers });
      expect(second.headers.get('x-cache')).toBe(HIT);
      expect(((await first.json()) as { name: string }).name).toBe(
        ((await second.json()) as { name: string }).name,
      );

      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: other.userId, name: 'Grace Hopper', update_mask: { paths: ['name'] } },
        other.headers,
      );
      expect(error).toBeNull();
      const after = await fetch(url, { headers: other.headers });
      expect(after.headers.get('x-cache')).toBe('MISS');
      expect(((await after.json()) as { name: string }).name).toBe('Grace Hopper');
    });

    it('is seen by the next GraphQL read, and a GraphQL change by the next GetUser', async () => {
      const query = async (q: string, variables: Record<string, unknown>) => {
        const res = await fetch(`${atrium.httpUrl}/graphql`, {
          method: 'POST',
          headers: { ...other.headers, 'content-type': 'application/json' },
          body: JSON.stringify({ query: q, variables }),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
      };
      const read = 'query($id: ID!) { user(id: $id) { firstName lastName email } }';
      const before = await query(read, { id: other.userId });
      expect(before.errors).toBeUndefined();

      const { error } = await unary(
        client,
        'UpdateUser',
        { user_id: other.userId, name: 'Katherine Johnson', update_mask: { paths: ['name'] } },
        other.headers,
      );
      expect(error).toBeNull();
      expect(await query(read, { id: other.userId })).toEqual({
        data: {
          user: {
            firstName: 'Katherine',
            lastName: 'Johnson',
            email: (before.data!.user as { email: string }).email,
          },
        },
      });

      const changed = await query(
        'mutation($id: ID!) { updateUser(id: $id, input: { name: "Dorothy Vaughan" }) { id } }',
        { id: other.userId },
      );
      expect(changed.errors).toBeUndefined();
      const { error: readError, value } = await unary<UserMessage>(
        client,
        'GetUser',
        { user_id: other.userId },
        other.headers,
      );
      expect(readError).toBeNull();
      expect(value?.name).toBe('Dorothy Vaughan');
    });
  });
});

describe('gRPC storage failure', () => {
  it('answers INTERNAL with no storage text when the database is gone', async () => {
    const atrium = await startGrpcAtrium();
    try {
      const caller = await atrium.caller();
      await atrium.services.store.close();
      const { error } = await unary(atrium.client(), 'GetUser', { user_id: caller.userId }, caller.headers);
      expect(error?.code).toBe(status.INTERNAL);
      expect(error?.details).toBe(
        'Internal error; the request id in the trailers identifies it in the logs.',
      );
      expect(error?.details).not.toMatch(/sqlite|pool|database|connection|sql/i);
      expect(error?.metadata.get('x-request-id')[0]).toMatch(/^req_[0-9a-f]{24}$/);
    } finally {
      await atrium.stop().catch(() => undefined);
    }
  });
});
