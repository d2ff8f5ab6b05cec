import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { ConfigError } from '../config/schema.js';
import { withoutPassword } from '../config/redact.js';

const SSL_FILES = { sslcert: 'cert', sslkey: 'key', sslrootcert: 'ca' } as const;

/**
 * The pool's connection options for DATABASE_URL, with `sslmode` read here rather than by
 * pg-connection-string. node-postgres 8 treats `prefer`, `require` and `verify-ca` as `verify-full`
 * and says so in a ten-line SECURITY WARNING on stderr every time it parses such a URL, which would
 * break the promise of one line per failure (and print on every start that succeeds). The same
 * strict meaning is kept and documented instead (README, DATABASE_URL): TLS required, certificate
 * and host name verified; `no-verify` encrypts without checking; `disable` turns TLS off. The
 * certificate files the URL names are read here too, since the options the URL yields would
 * replace an `ssl` object given beside it. A URL that asks for libpq's meanings
 * (`uselibpqcompat=true`) is passed on untouched: node-postgres warns of nothing then.
 */
export function pgPoolConfig(url: string): pg.PoolConfig {
  const q = url.indexOf('?');
  if (q < 0) return { connectionString: url };
  const params = new URLSearchParams(url.slice(q + 1));
  const mode = params.get('sslmode');
  if (mode === null || params.get('uselibpqcompat') === 'true') return { connectionString: url };
  const files: { cert?: string; key?: string; ca?: string } = {};
  for (const [param, option] of Object.entries(SSL_FILES)) {
    const path = params.get(param);
    params.delete(param);
    if (path === null) continue;
    try {
      files[option] = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(
        'DATABASE_URL',
        `a postgres:// URL whose ${param} file can be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
        withoutPassword(url),
      );
    }
  }
  params.delete('sslmode');
  const rest = params.toString();
  const connectionString = rest === '' ? url.slice(0, q) : `${url.slice(0, q)}?${rest}`;
  if (mode === 'disable') return { connectionString, ssl: false };
  if (mode === 'no-verify') return { connectionString, ssl: { ...files, rejectUnauthorized: false } };
  return { connectionString, ssl: { ...files } };
}
