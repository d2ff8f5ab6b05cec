import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { root } from '../../helpers/cli.js';

/** A path that is not there used to print Node's ENOENT stack: now one line naming it, exit 1. */
describe('npm run graphql:manifest with a missing file', () => {
  it('says which path it cannot read, in one line, and exits 1', () => {
    const res = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'scripts/graphql-manifest.ts', '/no/such/file'],
      {
        cwd: root,
        encoding: 'utf8',
      },
    );
    expect(res.status, res.stderr).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toBe('graphql:manifest: cannot read /no/such/file: ENOENT\n');
  }, 60_000);
});
