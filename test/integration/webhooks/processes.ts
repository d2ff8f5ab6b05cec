import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../helpers/cli.js';
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

export interface Served {
  child: ChildProcess;
  /** The HTTP base URL, when the roles include api or auth. */
  url: string | undefined;
  stderr: () => string;
  /** SIGKILL, and wait for the process to be gone. */
  kill9(): Promise<void>;
  /** SIGTERM, and wait for the drain to finish. */
  stop(): Promise<number | null>;
}

/** Runs `atrium serve` as a real child process and waits until it says it started. */
export async function serve(env: Record<string, string>, roles = 'all'): Promise<Served> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--role', roles], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`atrium serve did not start:\n${stderr}`)), 30_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      for (const line of stderr.split('\n')) {
        if (!line.includes('"atrium started"')) continue;
        clearTimeout(timer);
        resolve((JSON.parse(line) as { http?: string }).http);
        return;
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`atrium serve exited with ${code}:\n${stderr}`));
    });
  });
  return {
    child,
    url,
    stderr: () => stderr,
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
