import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the atrium command line from source in a child process, as a user would run it: from the
 * checkout, or from `cwd` (where it reads `.env`).
 */
export function runCli(args: string[], env: Record<string, string>, cwd = root): Promise<CliResult> {
  // From another folder `--import tsx` would not resolve; the loader is named by its file instead.
  const loader = pathToFileURL(join(root, 'node_modules/tsx/dist/loader.mjs')).href;
  return spawnCli(['--import', loader, join(root, 'src/cli/main.ts'), ...args], env, cwd);
}

/**
 * Runs the built command line (`bin/atrium.js`; call `ensureBuilt()` first), as an installed
 * `atrium` runs: it starts in a fraction of tsx's time, so processes started together really do
 * meet at their first statements.
 */
export function runBuiltCli(args: string[], env: Record<string, string>, cwd = root): Promise<CliResult> {
  return spawnCli([join(root, 'bin/atrium.js'), ...args], env, cwd);
}

/**
 * Runs the built CLI as runBuiltCli does, but ends a process still running after `boundMs` with
 * SIGTERM: a start that should be refused and is not (it serves, degraded) then fails the test's
 * assertions with its log instead of holding the test until its timeout, and is not left running.
 */
export function runBuiltCliBounded(
  args: string[],
  env: Record<string, string>,
  boundMs = 60_000,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'bin/atrium.js'), ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGTERM'), boundMs);
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function spawnCli(nodeArgs: string[], env: Record<string, string>, cwd: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs, {
      cwd,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export { root };
