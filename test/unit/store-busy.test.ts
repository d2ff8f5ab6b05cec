import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isStoreUnavailable } from '../../src/store/errors.js';

/** What SQLite answers a transaction that read before another connection's commit and then writes. */
function busySnapshot(): Error {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-busy-'));
  const a = new SQLite(join(dir, 'x.db'));
  const b = new SQLite(join(dir, 'x.db'));
  try {
    a.pragma('journal_mode = WAL');
    a.exec('create table t (n integer)');
    a.exec('begin');
    a.prepare('select count(*) from t').get();
    b.exec('insert into t values (1)');
    try {
      a.exec('insert into t values (2)');
    } catch (err) {
      return err as Error;
    }
    throw new Error('the stale writer was let through');
  } finally {
    if (a.inTransaction) a.exec('rollback');
    a.close();
    b.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a busy SQLite file', () => {
  it('counts SQLITE_BUSY_SNAPSHOT as the store out of reach (503), as plain SQLITE_BUSY is', () => {
    const err = busySnapshot();
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY_SNAPSHOT');
    expect(isStoreUnavailable(err)).toBe(true);
  });
});
