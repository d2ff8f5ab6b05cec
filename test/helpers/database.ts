import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A fresh database for one test file: SQLite in memory by default, or, when TEST_DATABASE_URL
 * names a PostgreSQL server, a new database on it that is dropped afterwards.
 */
export interface TestDatabase {
  url: string;
  dialect: 'sqlite' | 'postgres';
  drop(): Promise<void>;
}

export const testDialect = (): 'sqlite' | 'postgres' =>
  process.env.TEST_DATABASE_URL?.startsWith('postgres') ? 'postgres' : 'sqlite';

/** `adminUrl` names a PostgreSQL server to use whatever TEST_DATABASE_URL says (the cluster tests). */
export async function freshDatabase(options: { adminUrl?: string } = {}): Promise<TestDatabase> {
  const admin = options.adminUrl ?? process.env.TEST_DATABASE_URL;
  if (!admin || !admin.startsWith('postgres')) {
    return { url: 'sqlite::memory:', dialect: 'sqlite', drop: async () => undefined };
  }
  const name = `atrium_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    dialect: 'postgres',
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * A database several processes can share: a SQLite file (the in-memory default is one process's
 * own) or a fresh PostgreSQL database.
 */
export async function sharedDatabase(): Promise<TestDatabase> {
  const db = await freshDatabase();
  if (db.dialect === 'postgres') return db;
  const dir = mkdtempSync(join(tmpdir(), 'atrium-shared-'));
  return {
    url: `sqlite:${join(dir, 'atrium.db')}`,
    dialect: 'sqlite',
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
