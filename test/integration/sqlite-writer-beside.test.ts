import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestAtrium, type TestAtrium } from '../helpers/atrium.js';
import { ensureBuilt } from '../helpers/build.js';
import { runBuiltCli } from '../helpers/cli.js';
import { call } from '../helpers/rest-client.js';
import { makeCatalogue, orderBody, type Catalogue } from './orders/fixtures.js';

/**
 * docs/deployment.md: the admin commands write beside a serving process, each one transaction that
 * SQLite's WAL mode and busy timeout serialise. A transaction that read before it wrote (an order:
 * the catalogue, then the insert) used to fail at once when another process wrote meanwhile: SQLite
 * does not wait for a reader to become a writer over a newer commit (SQLITE_BUSY_SNAPSHOT, a 500),
 * and the admin command met the same from the server's side ("database is locked"). Every
 * transaction now takes the write lock as it begins, so it waits its turn instead.
 *
 * The other writer is a process of its own, as an admin command is: better-sqlite3 waits
 * synchronously, so a holder in this process could never let go.
 */
function holdWriteLock(file: string, productId: string, holdMs: number): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import SQLite from 'better-sqlite3';
       const db = new SQLite(${JSON.stringify(file)});
       db.exec('BEGIN IMMEDIATE');
       db.prepare("update products set name = name || '' where id = ?").run(${JSON.stringify(productId)});
       console.log('held');
       setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${holdMs});`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], cwd: process.cwd() },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`the lock holder exited ${code}`)));
  });
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', resolve),
  );

describe('an SQLite file written by another process while the server writes', () => {
  let dir: string;
  let file: string;
  let atrium: TestAtrium;
  let base: string;
  let headers: Record<string, string>;
  let catalogue: Catalogue;

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'atrium-writer-beside-'));
    file = join(dir, 'atrium.db');
    atrium = await startTestAtrium({ DATABASE_URL: `sqlite:${file}` }, ['api']);
    base = (await atrium.listen()).httpUrl!;
    headers = (await atrium.caller()).headers;
    catalogue = await makeCatalogue(atrium);
  });
  afterAll(async () => {
    await atrium?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates and cancels every order asked while another process holds and commits a write', async () => {
    const created = await Promise.all(
      Array.from({ length: 5 }, () =>
        call(base, 'POST', '/api/v2/orders', { headers, json: orderBody(catalogue) }),
      ),
    );
    const ids = created.map((c) => (c.body as { id: string }).id);
    const holder = await holdWriteLock(file, catalogue.widget, 300);
    // A cancel reads its order, then writes it: the read-then-write that did not wait.
    const answers = await Promise.all([
      ...ids.map((id) => call(base, 'POST', `/api/v2/orders/${id}/cancel`, { headers })),
      ...ids.map(() => call(base, 'POST', '/api/v2/orders', { headers, json: orderBody(catalogue) })),
    ]);
    expect(await exited(holder)).toBe(0);
    expect(answers.map((a) => a.status)).toEqual([...ids.map(() => 204), ...ids.map(() => 201)]);
  });

  it('lets an admin command that reads and then writes wait for the write lock', async () => {
    const { userId } = await atrium.caller();
    // Long enough for the command to start and meet the lock, well within the busy timeout (5 s).
    const holder = await holdWriteLock(file, catalogue.widget, 3000);
    const deleted = await runBuiltCli(['users', 'delete', userId], { DATABASE_URL: `sqlite:${file}` });
    expect(await exited(holder)).toBe(0);
    expect([deleted.code, deleted.stderr]).toEqual([0, '']);
    expect((await call(base, 'GET', `/v1/users/${userId}`, { headers })).status).toBe(404);
  });
});
