import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readEnvFile } from '../../src/config/env-file.js';
import { ConfigError, VARIABLES } from '../../src/config/schema.js';

const known = VARIABLES.map((v) => v.name);
const dir = mkdtempSync(join(tmpdir(), 'atrium-envfile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function read(text: string, env: NodeJS.ProcessEnv = {}) {
  const path = join(dir, `env-${n++}`);
  writeFileSync(path, text);
  return { typos: readEnvFile(path, env, known), env, path };
}

describe('.env', () => {
  it('sets what the environment does not, and leaves what it does', () => {
    const { env } = read('PORT=4000\nexport HOST=0.0.0.0\nGRPC_PORT="50052" # quoted\n', { PORT: '3001' });
    expect(env).toEqual({ PORT: '3001', HOST: '0.0.0.0', GRPC_PORT: '50052' });
  });

  it('accepts comments, empty lines, CRLF and a quoted value over several lines', () => {
    const { env, typos } = read('# one\r\n\r\nJWT_SECRET="first\nsecond line"\r\n  # two\nPORT=1\n');
    expect(env).toEqual({ JWT_SECRET: 'first\nsecond line', PORT: '1' });
    expect(typos).toEqual([]);
  });

  it('stops on a line that is not NAME=value, naming the file and the line', () => {
    for (const [text, line] of [
      ['PORT 4000', 1],
      ['PORT=1\n= 4000', 2],
      ['# ok\n4PORT=1', 2],
      ['HOST=a\nhttp://x', 2],
    ] as const) {
      let caught: unknown;
      try {
        read(text);
      } catch (err) {
        caught = err;
      }
      expect(caught, text).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).variable).toMatch(new RegExp(` line ${line}$`));
    }
  });

  it('is fine when missing and stops when it cannot be read', () => {
    expect(readEnvFile(join(dir, 'absent'), {}, known)).toEqual([]);
    expect(() => readEnvFile(dir, {}, known)).toThrow(/EISDIR/);
  });

  it('names a key that looks like a misspelt setting, and not an unrelated one', () => {
    const { typos, env } = read(
      'DATABSE_URL=x\nport=1\nHOME=/root\nTEST_DATABASE_URL=y\nPORTS=2\nNODE_OPTIONS=z\n',
    );
    expect(typos).toEqual([
      { key: 'DATABSE_URL', line: 1, meant: 'DATABASE_URL' },
      { key: 'port', line: 2, meant: 'PORT' },
      { key: 'PORTS', line: 5, meant: 'PORT' },
    ]);
    // A warning, not a refusal: the file's other keys are still set.
    expect(env.TEST_DATABASE_URL).toBe('y');
  });
});
