import { describe, expect, it } from 'vitest';
import { withoutPassword } from '../../src/config/redact.js';

/**
 * README: "a password in the URL is shown as `***`". node-postgres and ioredis both read
 * `?password=` as the password, so it is masked like the user part's.
 */
describe('withoutPassword', () => {
  it("masks the user part's password and keeps the user", () => {
    expect(withoutPassword('postgres://alice:hunter2@db:5432/x')).toBe('postgres://alice:***@db:5432/x');
    expect(withoutPassword('redis://:hunter2@127.0.0.1:6379/2')).toBe('redis://:***@127.0.0.1:6379/2');
  });

  it('masks a password given as a query parameter, leaving the other parameters as written', () => {
    expect(withoutPassword('postgres://postgres@127.0.0.1:1/db?password=PGSECRET4')).toBe(
      'postgres://postgres@127.0.0.1:1/db?password=***',
    );
    expect(
      withoutPassword(
        'postgres://postgres:pw@127.0.0.1/db?application_name=x&password=PGQUERYPASS&sslmode=disable',
      ),
    ).toBe('postgres://postgres:***@127.0.0.1/db?application_name=x&password=***&sslmode=disable');
    expect(withoutPassword('redis://127.0.0.1:6379/abc?password=REDISQPW')).toBe(
      'redis://127.0.0.1:6379/abc?password=***',
    );
    expect(withoutPassword('postgres://h/db?options=-c%20search_path%3Dx&PassWord=S')).toBe(
      'postgres://h/db?options=-c%20search_path%3Dx&PassWord=***',
    );
  });

  it('masks the key passphrase and anything named like a secret or token, not the file names', () => {
    expect(
      withoutPassword(
        'postgres://h/db?sslmode=require&sslkey=/etc/k.pem&sslpassword=KEYPASS&sslcert=/etc/c.pem',
      ),
    ).toBe('postgres://h/db?sslmode=require&sslkey=/etc/k.pem&sslpassword=***&sslcert=/etc/c.pem');
    expect(withoutPassword('redis://h/0?client_secret=S1&auth_token=T1&pwd=P1&pass%77ord=P2')).toBe(
      'redis://h/0?client_secret=***&auth_token=***&pwd=***&pass%77ord=***',
    );
  });

  it('masks them in a URL that does not parse too, and a fragment neither client reads', () => {
    expect(withoutPassword('postgres://alice:hunter2@127.0.0.1:99999/x?password=Q')).toBe(
      'postgres://alice:***@127.0.0.1:99999/x?password=***',
    );
    expect(withoutPassword('postgres://h/db?password=ab#cd')).toBe('postgres://h/db?password=***#***');
  });

  it('leaves a URL without secrets as given', () => {
    for (const url of [
      'sqlite::memory:',
      'sqlite:./data/atrium.db',
      'postgres://alice@h/db?sslmode=disable&x',
    ]) {
      expect(withoutPassword(url)).toBe(url);
    }
  });
});
