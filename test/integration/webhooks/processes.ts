import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';

/**
 * A database several processes can share: a SQLite file (the in-memory default is one process's
 * own) or a fresh PostgreSQL database.
 */
export async function sharedDatabase(): Promise<TestDatabase> {
  const db = await freshDatabase();
  if (db.dialect === 'postgres') return db;
  const dir = mkdtempSync(join(tmpdir(), 'atrium-webhooks-'));
  return {
    url: `sqlite:${join(dir, 'atrium.db')}`,
    dialect: 'sqlite',
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
