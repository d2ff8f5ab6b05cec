import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

/**
 * README: only the password of DATABASE_URL is masked. A URL that does not parse (port 99999) used
 * to lose its whole user part (`postgres://***@...`) even with no password in it.
 */
describe('DATABASE_URL in a configuration error', { timeout: 60_000 }, () => {
  const shown = async (url: string) => {
    const res = await runCli(['migrate'], { DATABASE_URL: url });
    expect(res.code, res.stderr).toBe(1);
    return (JSON.parse(res.stderr.trim()) as { message: string }).message;
  };

  it('keeps the user when there is no password', async () => {
    expect(await shown('postgres://alice@127.0.0.1:99999/x')).toContain(
      'got "postgres://alice@127.0.0.1:99999/x"',
    );
  });

  it('masks the password only', async () => {
    const message = await shown('postgres://alice:hunter2@127.0.0.1:99999/x');
    expect(message).toContain('got "postgres://alice:***@127.0.0.1:99999/x"');
    expect(message).not.toContain('hunter2');
  });
});
