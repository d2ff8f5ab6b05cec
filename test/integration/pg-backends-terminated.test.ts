import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { OUTAGE_ADMIN_URL, postgresMissing } from '../helpers/database-outage.js';
import { serve, type Served } from '../helpers/serve.js';

/**
 * An operator (or a failover) terminating the service's PostgreSQL connections while requests flow.
 * A connection the pool had just opened could receive its FATAL in the same read as its first
 * ReadyForQuery, before anything listened for the client's 'error' event: the process died with
 * "Unhandled 'error' event" (an outside walk: 6 runs of 6, within 2 to 14 rounds). Each request may
 * fail with 503; the process must stay up and answer again once the connections are back.
 */

const skip = await postgresMissing();

describe.skipIf(skip !== undefined)('PostgreSQL backends terminated under load', () => {
  let db: TestDatabase;
  let served: Served;
  let admin: pg.Client;

  beforeAll(async () => {
    db = await freshDatabase({ adminUrl: OUTAGE_ADMIN_URL });
    served = await serve({ DATABASE_URL: db.url }, { roles: 'api' });
    admin = new pg.Client({ connectionString: OUTAGE_ADMIN_URL });
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    await served?.kill9();
    await admin?.end();
    await db?.drop();
  });

  it('keeps serving: a request fails with 503 at worst, and the process never exits', async () => {
    const name = new URL(db.url).pathname.slice(1);
    const statuses = new Map<number, number>();
    let running = true;
    const query = JSON.stringify({ query: '{ posts(first: 5) { edges { node { id } } } }' });
    // GraphQL reads (an anonymous caller's budget may answer 429) and readiness probes, which read
    // the database without a budget.
    const load = async (_: unknown, n: number) => {
      while (running && served.child.exitCode === null) {
        const res = await (
          n % 2 === 0
            ? fetch(`${served.url}/graphql`, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: query,
              })
            : fetch(`${served.url}/readyz`)
        ).catch(() => undefined);
        if (res) {
          await res.arrayBuffer();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }
    };
    const loads = Array.from({ length: 8 }, load);
    let rounds = 0;
    const deadline = Date.now() + 8_000;
    while (Date.now() < deadline && served.child.exitCode === null) {
      await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [name],
      );
      rounds += 1;
      await new Promise((r) => setTimeout(r, 100));
    }
    running = false;
    await Promise.all(loads);

    expect(served.child.exitCode, served.stderr().slice(-2_000)).toBeNull();
    expect(rounds).toBeGreaterThan(20);
    expect([...statuses.keys()].filter((s) => ![200, 429, 503].includes(s))).toEqual([]);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    const ready = await fetch(`${served.url}/readyz`);
    expect(ready.status).toBe(200);
  }, 60_000);
});
