import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/build.js';
import { runBuiltCli, type CliResult } from '../helpers/cli.js';
import { serve } from '../helpers/serve.js';
import { freshDatabase, testDialect, type TestDatabase } from '../helpers/database.js';

/** Every table (and view) in an SQLite file, by name. */
function sqliteTables(file: string): string[] {
  const db = new SQLite(file, { readonly: true });
  try {
    return db
      .prepare("select name from sqlite_master where type in ('table', 'view') and name not like 'sqlite_%'")
      .pluck()
      .all() as string[];
  } finally {
    db.close();
  }
}

/** Rows of one query against the database behind `url` (a file, or PostgreSQL). */
async function rows(url: string, query: string): Promise<Record<string, unknown>[]> {
  if (url.startsWith('sqlite:')) {
    const db = new SQLite(url.slice('sqlite:'.length), { readonly: true });
    try {
      return db.prepare(query).all() as Record<string, unknown>[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(query)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

const failures = (results: CliResult[]) =>
  results.filter((r) => r.code !== 0).map((r) => `${r.code}: ${r.stderr.trim()}`);

/**
 * Several processes starting at once on a database nobody has migrated yet: the README's first run
 * (`atrium serve` beside `atrium seed`), or a script creating records in parallel. On SQLite,
 * Kysely's migration lock does nothing and its migrations are not transactional, so 1 to 3 of 8
 * such commands failed with `table "settings" already exists` in about half the rounds.
 */
describe('migrating a fresh database from several processes at once', { timeout: 240_000 }, () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'atrium-migrate-race-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('eight admin commands started together on a fresh database all succeed, and migrate it once', async () => {
    // The race lost about every other round; six rounds make a pass by luck unlikely (1 in 64).
    for (let round = 1; round <= 6; round++) {
      let db: TestDatabase | undefined;
      let url: string;
      if (testDialect() === 'postgres') {
        db = await freshDatabase();
        url = db.url;
      } else {
        url = `sqlite:${join(dir, `round-${round}.db`)}`;
      }
      try {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            runBuiltCli(['orgs', 'create', '--name', `P${i}`], { DATABASE_URL: url, LOG_LEVEL: 'silent' }),
          ),
        );
        expect(failures(results), `round ${round}`).toEqual([]);
        // PostgreSQL's count(*) is an int8, which pg hands over as a string.
        const [count] = await rows(url, 'select count(*) as n from organizations');
        expect(Number(count!.n)).toBe(8);
        const applied = (await rows(url, 'select name from kysely_migration')).map((r) => r.name);
        expect(applied.length).toBeGreaterThan(0);
        expect(new Set(applied).size).toBe(applied.length);
      } finally {
        await db?.drop();
      }
    }
  });

  it.runIf(testDialect() === 'sqlite')(
    "the README's first run, serve and seed started together on a fresh SQLite file, starts both",
    async () => {
      for (let round = 1; round <= 3; round++) {
        const url = `sqlite:${join(dir, `serve-seed-${round}.db`)}`;
        const env = { DATABASE_URL: url, LOG_LEVEL: 'silent' };
        const [served, ...results] = await Promise.allSettled([
          serve(
            { DATABASE_URL: url, PORT: String(4760 + round), GRPC_PORT: String(4770 + round) },
            { asUser: { cwd: dir } },
          ),
          runBuiltCli(['seed'], env),
          runBuiltCli(['orgs', 'create', '--name', 'Beside'], env),
        ]);
        if (served.status === 'fulfilled') {
          const ready = await fetch(`${served.value.url}/readyz`);
          expect(ready.status, `round ${round}`).toBe(200);
          expect(await served.value.stop(), served.value.stderr()).toBe(0);
        }
        expect(served.status === 'rejected' ? String(served.reason) : '', `round ${round}`).toBe('');
        const done = results.map((r) =>
          r.status === 'fulfilled' ? r.value : { code: -1, stdout: '', stderr: String(r.reason) },
        );
        expect(failures(done), `round ${round}`).toEqual([]);
      }
    },
  );
});

describe('an SQLite file another program made', { timeout: 60_000 }, () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'atrium-foreign-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is refused as DATABASE_URL, naming its tables, and left exactly as it was', async () => {
    const file = join(dir, 'theirs.db');
    const theirs = new SQLite(file);
    theirs.exec(
      "create table users (id integer primary key, login text); insert into users (login) values ('ada')",
    );
    theirs.close();
    for (const args of [['migrate'], ['orgs', 'create', '--name', 'X']]) {
      const res = await runBuiltCli(args, { DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: 'silent' });
      expect(res.code, res.stderr).toBe(1);
      expect(res.stdout).toBe('');
      const lines = res.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      const err = JSON.parse(lines[0]!);
      expect(err, args.join(' ')).toMatchObject({ error: 'invalid_configuration', variable: 'DATABASE_URL' });
      expect(err.message).toContain('tables Atrium did not create (users)');
      expect(sqliteTables(file)).toEqual(['users']);
    }
  });

  it('a migration that fails part-way leaves nothing of itself behind', async () => {
    // Kysely's table is there (so the file passes for Atrium's), but a `users` table of another
    // shape is in the way: 0001_initial creates settings and organizations, then fails at users.
    const file = join(dir, 'half.db');
    const half = new SQLite(file);
    half.exec(
      'create table kysely_migration (name varchar(255) not null primary key, timestamp varchar(255) not null);' +
        'create table users (id integer primary key)',
    );
    half.close();
    const res = await runBuiltCli(['migrate'], { DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: 'silent' });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).toContain('table \\"users\\" already exists');
    expect(sqliteTables(file).sort()).toEqual(['kysely_migration', 'users']);
  });
});
