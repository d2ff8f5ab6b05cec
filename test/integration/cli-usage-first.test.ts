import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_COMMANDS } from '../../src/cli/commands.js';
import { ensureBuilt } from '../helpers/build.js';
import { runBuiltCli, type CliResult } from '../helpers/cli.js';

/** Runs the command lines, at most `width` at a time (each is a whole Node process). */
async function runAll(cases: string[][], env: Record<string, string>, cwd: string, width = 3) {
  const results: CliResult[] = [];
  for (let i = 0; i < cases.length; i += width) {
    results.push(
      ...(await Promise.all(cases.slice(i, i + width).map((args) => runBuiltCli(args, env, cwd)))),
    );
  }
  return results;
}

function expectUsage(res: CliResult, args: string[]) {
  const what = `${args.join(' ')}: ${res.stderr}`;
  expect(res.code, what).toBe(2);
  expect(res.stdout, what).toBe('');
  const lines = res.stderr.trim().split('\n');
  expect(lines, what).toHaveLength(1);
  expect(JSON.parse(lines[0]!), what).toMatchObject({ error: 'usage' });
}

/**
 * Decisions §2: bad usage exits 2. The admin commands used to open (and make, and migrate) the
 * database before they parsed their arguments: `atrium users create` with no flags exited 2 but had
 * made ./data/atrium.db with the whole schema, and with an unreachable DATABASE_URL `orgs create
 * --bogus` or `users delete` without its ID exited 1 naming DATABASE_URL instead.
 */
describe('an admin command checks its arguments before it opens the database', { timeout: 240_000 }, () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'atrium-usage-first-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('exits 2 for every command with bad usage, leaving an empty folder empty', async () => {
    // No configuration at all: the database would be ./data/atrium.db in this folder.
    const empty = mkdtempSync(join(dir, 'empty-'));
    const every = Object.keys(ADMIN_COMMANDS).map((name) => [...name.split(' '), '--bogus']);
    const cases = [
      ['users', 'create'],
      ['users', 'delete'],
      ['products', 'create', '--name', 'Mug'],
      ...every,
    ];
    const results = await runAll(cases, {}, empty);
    results.forEach((res, i) => expectUsage(res, cases[i]!));
    expect(readdirSync(empty)).toEqual([]);
  });

  it('exits 2 for bad usage before it tries to reach DATABASE_URL', async () => {
    // Nothing listens on this port: an attempt to connect would end as DATABASE_URL's error, exit 1.
    const unreachable = { DATABASE_URL: 'postgres://postgres@127.0.0.1:4799/x' };
    const cases = [
      ['orgs', 'create', '--bogus'],
      ['users', 'delete'],
      ['users', 'create', '--handle', 'ada', '--email', 'ada@example.com', '--role', 'owner'],
      ['products', 'create', '--name', 'Mug', '--price-cents', 'twelve'],
      ['webhooks', 'send-test', 'wh_1'],
    ];
    const results = await runAll(cases, unreachable, dir);
    results.forEach((res, i) => expectUsage(res, cases[i]!));
    // Arguments that are right still reach the database, and its error is still DATABASE_URL's.
    const reached = await runBuiltCli(['orgs', 'create', '--name', 'Acme'], unreachable, dir);
    expect(reached.code, reached.stderr).toBe(1);
    expect(JSON.parse(reached.stderr.trim())).toMatchObject({
      error: 'invalid_configuration',
      variable: 'DATABASE_URL',
    });
  });
});
