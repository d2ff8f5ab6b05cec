import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_COMMANDS } from '../../src/cli/commands.js';
import { runCli, type CliResult } from '../helpers/cli.js';

const usage = (res: CliResult): { error: string; message: string } => {
  expect(res.code, res.stderr).toBe(2);
  expect(res.stdout).toBe('');
  const lines = res.stderr.trim().split('\n');
  expect(lines, res.stderr).toHaveLength(1);
  return JSON.parse(lines[0]!) as { error: string; message: string };
};

/**
 * A new user typing a command group alone (`atrium users`) was told `unknown command "users"`: a
 * usage error (exit 2, one `{"error":"usage"}` line) that now lists the subcommands, without
 * opening the database. A negative price got parseArgs' own advice about ambiguous arguments; it
 * is now read as the flag's value and refused by the core's range rule (exit 1, naming the field).
 */
describe('usage errors that say what is wanted', { timeout: 120_000 }, () => {
  let cwd: string;
  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), 'atrium-cli-groups-'));
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  for (const group of ['users', 'webhooks', 'signing-keys']) {
    it(`"atrium ${group}" lists the group's subcommands`, async () => {
      const body = usage(await runCli([group], {}, cwd));
      expect(body.error).toBe('usage');
      expect(body.message).not.toMatch(/unknown command/);
      expect(body.message).toMatch(`"${group}" needs a subcommand`);
      for (const name of Object.keys(ADMIN_COMMANDS).filter((n) => n.startsWith(`${group} `)))
        expect(body.message).toContain(name.slice(group.length + 1));
    });
  }

  it('a command that is no group is still unknown', async () => {
    expect(usage(await runCli(['nosuch'], {}, cwd)).message).toMatch('unknown command "nosuch"');
  });

  it('a negative --price-cents is read as its value, and the core refuses it naming price_cents', async () => {
    const res = await runCli(['products', 'create', '--name', 'N', '--price-cents', '-5'], {}, cwd);
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).not.toMatch(/ambiguous/);
    expect(JSON.parse(res.stderr.trim()).details).toEqual([
      expect.objectContaining({ field: 'price_cents', code: 'range_error' }),
    ]);
  });
});
