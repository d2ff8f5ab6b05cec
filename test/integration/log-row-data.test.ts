import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { OUTAGE_ADMIN_URL, postgresMissing } from '../helpers/database-outage.js';
import { memoryLog } from '../helpers/memory-log.js';
import { forSuite } from '../helpers/suite.js';
import { grpc, startGrpcAtrium, unary } from './grpc/support.js';

/**
 * docs/decisions.md D11: a logged error never carries row data. PostgreSQL's `detail` on a failed
 * write is the whole row ("Failing row contains (...)"): a webhook endpoint's URL with its query,
 * its signing secret and the previous one, a user's email and password hash. It used to reach the
 * error lines of REST (`unhandled error`), gRPC (`grpc call failed`) and GraphQL (`graphql operation
 * failed`) verbatim. The failures are made with a CHECK constraint added NOT VALID, which only new
 * rows meet, so this runs on PostgreSQL whatever dialect the run uses.
 */
const missing = await postgresMissing();

describe.skipIf(missing)('row data in logged database errors', { timeout: 60_000 }, () => {
  const log = memoryLog('info');
  const db = forSuite(
    () => freshDatabase({ adminUrl: OUTAGE_ADMIN_URL }),
    (d: TestDatabase) => d.drop(),
  );
  const atrium = forSuite(
    () => startGrpcAtrium({ DATABASE_URL: db.url }, { logger: log.logger }),
    (a) => a.stop(),
  );
  const sql = async (statement: string) => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  const errorLines = (msg: string) => log.lines.filter((l) => l.msg === msg);
  const everything = () => log.lines.map((l) => JSON.stringify(l)).join('\n');

  let admin: Awaited<ReturnType<typeof atrium.caller>>;
  beforeAll(async () => {
    admin = await atrium.caller({ role: 'admin' });
  });

  const expectCensored = (line: Record<string, unknown> | undefined, table: string, constraint: string) => {
    expect(line, everything()).toBeDefined();
    expect(line!.err).toMatchObject({
      code: '23514',
      table,
      constraint,
      detail: '[redacted]',
      message: `new row for relation "${table}" violates check constraint "${constraint}"`,
    });
  };

  it('a webhook endpoint: its URL, secret and previous secret stay out of REST error lines', async () => {
    const rest = (path: string, body: unknown) =>
      fetch(`${atrium.httpUrl}${path}`, {
        method: 'POST',
        headers: { ...admin.headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await rest('/api/v2/webhook_endpoints', {
      url: 'http://127.0.0.1:9/hook?token=URLTOKEN41',
      events: ['order.created'],
    });
    expect(created.status).toBe(201);
    const endpoint = (await created.json()) as { id: string; secret: string };
    expect(endpoint.secret).toMatch(/^whsec_/);
    await sql(`alter table webhook_endpoints add constraint short_url check (length(url) < 5) not valid`);

    const rotated = await rest(`/api/v2/webhook_endpoints/${endpoint.id}/rotate_secret`, {});
    expect(rotated.status).toBe(500);
    const again = await rest('/api/v2/webhook_endpoints', {
      url: 'http://127.0.0.1:9/other?token=URLTOKEN42',
      events: ['order.created'],
    });
    expect(again.status).toBe(500);

    const lines = errorLines('unhandled error');
    expect(lines).toHaveLength(2);
    for (const line of lines) expectCensored(line, 'webhook_endpoints', 'short_url');
    const text = everything();
    for (const secret of [endpoint.secret, 'URLTOKEN41', 'URLTOKEN42', 'whsec_', 'Failing row']) {
      expect(text).not.toContain(secret);
    }
  });

  it("a user: the email and password hash stay out of REST's, gRPC's and GraphQL's error lines", async () => {
    const user = await atrium.services.core.users.create({
      handle: 'rowdata',
      email: 'row.data.owner@example.com',
      name: 'Ada Lovelace',
      password: 'correct horse battery staple',
    });
    const stored = await atrium.services.store.db
      .selectFrom('users')
      .select('password_hash')
      .where('id', '=', user.id)
      .executeTakeFirstOrThrow();
    // scrypt$N$r$p$salt$hash: PostgreSQL shortens a long value in `detail`, the salt is always there.
    const salt = stored.password_hash!.split('$')[4]!;
    expect(salt.length).toBeGreaterThan(8);
    await sql(`alter table users add constraint no_boom check (first_name <> 'Boom') not valid`);

    const rest = await fetch(`${atrium.httpUrl}/v1/users/${user.id}`, {
      method: 'PATCH',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Boom Bam' }),
    });
    expect(rest.status).toBe(500);

    const viaGrpc = await unary(
      atrium.client(),
      'UpdateUser',
      { user_id: user.id, name: 'Boom Bam', update_mask: { paths: ['name'] } },
      admin.headers,
    );
    expect(viaGrpc.error?.code).toBe(grpc.status.INTERNAL);

    const gql = await fetch(`${atrium.httpUrl}/graphql`, {
      method: 'POST',
      headers: { ...admin.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'mutation($id: ID!) { updateUser(id: $id, input: { name: "Boom Bam" }) { id } }',
        variables: { id: user.id },
      }),
    });
    const body = (await gql.json()) as { errors?: Array<{ extensions?: { code?: string } }> };
    expect(body.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');

    expectCensored(errorLines('unhandled error').at(-1), 'users', 'no_boom');
    expectCensored(errorLines('grpc call failed').at(-1), 'users', 'no_boom');
    expectCensored(errorLines('graphql operation failed').at(-1), 'users', 'no_boom');
    const text = everything();
    for (const secret of [salt, 'scrypt$', 'row.data.owner@example.com', 'Failing row']) {
      expect(text).not.toContain(secret);
    }
  });
});
