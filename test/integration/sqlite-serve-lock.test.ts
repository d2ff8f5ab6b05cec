import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/schema.js';
import { claimSqlite } from '../../src/process/sqlite-guard.js';

// Another process holding the lock through the real claimSqlite, as a second `atrium serve` would.
function holder(url: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import { claimSqlite } from ${JSON.stringify(new URL('../../src/process/sqlite-guard.ts', import.meta.url).pathname)};
       claimSqlite(${JSON.stringify(url)}); console.log('held'); setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`the holder exited ${code}`)));
  });
}

function refusal(url: string): ConfigError {
  try {
    claimSqlite(url);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('claimSqlite took a lock another process holds');
}

describe('one serving process per SQLite file', () => {
  let dir: string;
  let url: string;
  let lock: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-serve-lock-'));
    url = `sqlite:${join(dir, 'atrium.db')}`;
    lock = join(dir, 'atrium.db.serve-lock');
  });
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a second claim while a live process holds it, naming DATABASE_URL and its pid', async () => {
    const other = await holder(url);
    children.push(other);
    const err = refusal(url);
    expect(err.variable).toBe('DATABASE_URL');
    expect(err.message).toContain(`process ${other.pid} already serves it`);
    expect(err.message).toContain('PostgreSQL');
    expect(err.message).not.toContain('\n');
  });

  it('is free the moment its holder is killed, with no file to delete', async () => {
    const other = await holder(url);
    children.push(other);
    const gone = new Promise((r) => other.once('exit', r));
    other.kill('SIGKILL');
    await gone;
    const claim = claimSqlite(url)!;
    expect(refusal(url).message).toContain(`process ${process.pid} already serves it`);
    claim.release();
  });

  it('does not take a live unrelated process for the holder (a pid reused after a crash)', async () => {
    const other = await holder(url);
    children.push(other);
    const gone = new Promise((r) => other.once('exit', r));
    other.kill('SIGKILL');
    await gone;
    // The dead holder's pid now belongs to someone else, alive: the lock must still be free.
    const unrelated = spawn('sleep', ['30']);
    children.push(unrelated);
    const db = new SQLite(lock);
    db.prepare('UPDATE holder SET pid = ?').run(unrelated.pid);
    db.close();
    const claim = claimSqlite(url)!;
    expect(claim).toBeDefined();
    claim.release();
  });

  it('is free again after release, and the next claim holds it', () => {
    claimSqlite(url)!.release();
    const again = claimSqlite(url)!;
    expect(refusal(url).message).toContain(`process ${process.pid}`);
    again.release();
    expect(readdirSync(dir)).toContain('atrium.db.serve-lock');
  });

  it('reads a lock file of an earlier Atrium by its pid: a live one refuses, a dead one is replaced', async () => {
    const older = spawn('sleep', ['30']);
    children.push(older);
    writeFileSync(lock, `${older.pid}\n`);
    expect(refusal(url).message).toContain(`process ${older.pid} already serves it`);
    writeFileSync(lock, '2147483646\n');
    const claim = claimSqlite(url)!;
    expect(refusal(url).message).toContain(`process ${process.pid}`);
    claim.release();
  });
});
