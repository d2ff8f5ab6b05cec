import { spawn } from 'node:child_process';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { root, runBuiltCli } from '../helpers/cli.js';
import { sharedDatabase, testDialect, type TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/ports.js';
import { serve } from '../helpers/serve.js';
import { migrationsFor } from '../../src/store/migrations/index.js';

/** Runs statements against the database behind `url` (a file, or PostgreSQL); returns the last one's rows. */
async function query(url: string, ...statements: string[]): Promise<Record<string, unknown>[]> {
  let rows: Record<string, unknown>[] = [];
  if (url.startsWith('sqlite:')) {
    const db = new SQLite(url.slice('sqlite:'.length));
    try {
      for (const s of statements) {
        const st = db.prepare(s);
        rows = st.reader ? (st.all() as Record<string, unknown>[]) : (st.run(), []);
      }
    } finally {
      db.close();
    }
    return rows;
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const s of statements) rows = (await client.query(s)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
  return rows;
}

/** The database's recorded migrations and its tables: what a refused or idle migrate must leave alone. */
async function schemaState(url: string): Promise<{ migrations: string[]; tables: string[] }> {
  const migrations = (await query(url, 'select name from kysely_migration order by name')).map((r) =>
    String(r.name),
  );
  const tables = (
    await query(
      url,
      url.startsWith('sqlite:')
        ? "select name from sqlite_master where type = 'table' order by name"
        : "select table_name as name from information_schema.tables where table_schema = 'public' order by table_name",
    )
  ).map((r) => String(r.name));
  return { migrations, tables };
}

const NEWER =
  "insert into kysely_migration (name, timestamp) values ('0099_future', '2026-12-01T00:00:00.000Z')";

/**
 * `atrium serve` of the built CLI, run until it either says it started (then stopped with SIGTERM)
 * or exits by itself: a start that is refused must not hang the test when the old code starts.
 */
function serveUntilStartedOrExit(
  env: Record<string, string>,
): Promise<{ started: boolean; code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    let started = false;
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (!started && stderr.includes('"atrium started"')) {
        started = true;
        child.kill('SIGTERM');
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ started, code, stderr }));
  });
}

/**
 * A rolling upgrade: `atrium migrate` of the new build runs while the old build still serves, and an
 * old instance restarted then (or the whole old build, rolled back to) must start on the newer
 * schema. Atrium's migrations are additive (docs/architecture.md), so a database that records
 * migrations this build does not know, all after its own, is served; one that another branch
 * migrated is refused clearly. Before, Kysely refused any unknown name as "corrupted migrations"
 * (an internal error) on PostgreSQL, and SQLite skipped the check altogether.
 */
describe(`a database migrated by another build, on ${testDialect()}`, { timeout: 120_000 }, () => {
  let db: TestDatabase | undefined;
  let url: string;
  beforeAll(() => ensureBuilt());
  async function migrated(): Promise<void> {
    db = await sharedDatabase();
    // A password in the URL (PostgreSQL's trust auth ignores it) shows that refusals mask it.
    url = db.dialect === 'postgres' ? db.url.replace('//postgres@', '//postgres:s3cret-pw@') : db.url;
    const res = await runBuiltCli(['migrate'], { DATABASE_URL: url });
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout).applied).toContain('0007_login_tickets');
  }
  afterEach(async () => {
    await db?.drop();
    db = undefined;
  });

  it('newer migrations recorded: migrate applies nothing and names them; serve starts, warns once, answers', async () => {
    await migrated();
    await query(url, NEWER);
    const before = await schemaState(url);

    const res = await runBuiltCli(['migrate'], { DATABASE_URL: url });
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({ applied: [], newer: ['0099_future'] });
    expect(await schemaState(url)).toEqual(before);

    // Admin commands start too (the same migration step), and write.
    const cli = async (args: string[]) => {
      const out = await runBuiltCli(args, { DATABASE_URL: url });
      expect(out.code, out.stderr).toBe(0);
      return JSON.parse(out.stdout) as Record<string, string>;
    };
    const user = await cli(['users', 'create', '--handle', 'rolled', '--email', 'rolled@example.com']);
    const key = await cli(['api-keys', 'create', '--user', user.id!]);

    const served = await serve(
      { DATABASE_URL: url, PORT: String(await freePort()), GRPC_PORT: String(await freePort()) },
      { asUser: { cwd: root } },
    );
    try {
      const ready = await fetch(`${served.url}/readyz`);
      expect(ready.status, await ready.text()).toBe(200);
      const read = await fetch(`${served.url}/v1/users/${user.id}`, {
        headers: { 'x-api-key': key.key! },
      });
      expect(read.status, await read.clone().text()).toBe(200);
      expect(JSON.stringify(await read.json())).toContain('rolled');
    } finally {
      expect(await served.stop(), served.stderr()).toBe(0);
    }
    const warnings = served
      .stderr()
      .split('\n')
      .filter((line) => line.includes('0099_future'));
    expect(warnings, served.stderr()).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, newer_migrations: ['0099_future'] });
    expect(await schemaState(url)).toEqual(before);
  });

  /** Both commands refused as DATABASE_URL's one-line error naming `names`, the database untouched. */
  async function expectRefused(names: string[]): Promise<void> {
    const before = await schemaState(url);
    const ran = [
      await runBuiltCli(['migrate'], { DATABASE_URL: url }),
      await serveUntilStartedOrExit({
        DATABASE_URL: url,
        PORT: String(await freePort()),
        GRPC_PORT: String(await freePort()),
      }),
    ];
    for (const res of ran) {
      expect('started' in res && res.started, res.stderr).toBe(false);
      expect(res.code, res.stderr).toBe(1);
      const lines = res.stderr.trim().split('\n');
      expect(lines, res.stderr).toHaveLength(1);
      const err = JSON.parse(lines[0]!);
      expect(err).toMatchObject({ error: 'invalid_configuration', variable: 'DATABASE_URL' });
      for (const name of names) expect(err.message).toContain(name);
      expect(err.message).not.toContain('corrupted');
      if (db!.dialect === 'postgres') {
        expect(err.message).toContain('postgres:***@');
        expect(res.stderr).not.toContain('s3cret-pw');
      }
    }
    expect(await schemaState(url)).toEqual(before);
  }

  it('an unknown migration sorting before a known one (another branch) is refused clearly', async () => {
    await migrated();
    await query(
      url,
      "insert into kysely_migration (name, timestamp) values ('0004_branch', '2026-12-01T00:00:00.000Z')",
    );
    // The refusal names this build's last migration, whichever that is now.
    const lastKnown = Object.keys(migrationsFor('sqlite')).sort().at(-1)!;
    await expectRefused(['0004_branch', lastKnown, 'another branch']);
  });

  it("newer migrations recorded while one of this build's own is missing are refused clearly", async () => {
    await migrated();
    await query(url, "delete from kysely_migration where name = '0007_login_tickets'", NEWER);
    await expectRefused(['0099_future', '0007_login_tickets']);
  });
});
