import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './cli.js';

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * For tests that run the built CLI (`bin/atrium.js`), as `npm start` and a deployment do: the
 * cluster (six processes through tsx would cost the 2-core machine more than the tests themselves)
 * and the first start. Rebuilds dist/ when a source file is newer than it (one builder at a time
 * across test files).
 */
export function ensureBuilt(): void {
  const main = join(root, 'dist/cli/main.js');
  const stale = () => !existsSync(main) || statSync(main).mtimeMs < newestMtime(join(root, 'src'));
  if (!stale()) return;
  const lock = join(root, 'dist.build-lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error('waited too long for another build of dist/');
      execFileSync('sleep', ['1']);
    }
  }
  try {
    if (stale())
      execFileSync(
        process.execPath,
        [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
        { cwd: root, stdio: 'inherit' },
      );
  } finally {
    rmdirSync(lock);
  }
}
