import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/schema.js';
import { pgPoolConfig } from '../../src/store/pg-options.js';

describe('sslmode in DATABASE_URL', () => {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-pg-options-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('leaves a URL without sslmode, or asking for libpq semantics, to node-postgres', () => {
    for (const url of [
      'postgres://u@h/db',
      'postgres://u@h/db?application_name=x',
      'postgres://u@h/db?uselibpqcompat=true&sslmode=require',
    ]) {
      expect(pgPoolConfig(url)).toEqual({ connectionString: url });
    }
  });

  it('reads sslmode itself (so node-postgres prints no SECURITY WARNING), keeping its strict meaning', () => {
    expect(pgPoolConfig('postgres://u@h/db?sslmode=require')).toEqual({
      connectionString: 'postgres://u@h/db',
      ssl: {},
    });
    expect(pgPoolConfig('postgres://u@h/db?sslmode=prefer&application_name=x')).toEqual({
      connectionString: 'postgres://u@h/db?application_name=x',
      ssl: {},
    });
    expect(pgPoolConfig('postgres://u@h/db?sslmode=disable')).toEqual({
      connectionString: 'postgres://u@h/db',
      ssl: false,
    });
    expect(pgPoolConfig('postgres://u@h/db?sslmode=no-verify')).toEqual({
      connectionString: 'postgres://u@h/db',
      ssl: { rejectUnauthorized: false },
    });
  });

  it('reads the certificate files the URL names, or names DATABASE_URL when it cannot', () => {
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, 'CA');
    expect(pgPoolConfig(`postgres://u@h/db?sslmode=verify-full&sslrootcert=${ca}`)).toEqual({
      connectionString: 'postgres://u@h/db',
      ssl: { ca: 'CA' },
    });
    let thrown: unknown;
    try {
      pgPoolConfig(`postgres://u:hunter2@h/db?sslmode=verify-ca&sslrootcert=${join(dir, 'missing.pem')}`);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect(thrown).toMatchObject({ variable: 'DATABASE_URL' });
    expect((thrown as Error).message).toContain('sslrootcert');
    expect((thrown as Error).message).toContain('ENOENT');
    expect((thrown as Error).message).not.toContain('hunter2');
  });
});
