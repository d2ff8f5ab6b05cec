import { describe, expect, it } from 'vitest';
import { createLogger, redactHeaderText } from '../../src/observability/logger.js';

function capture() {
  const lines: string[] = [];
  return { lines, stream: { write: (s: string) => void lines.push(s) } };
}

describe('logger', () => {
  it('redacts credentials in request headers', () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    log.info(
      {
        req: {
          headers: {
            authorization: 'Bearer eyJ.secret.sig',
            'x-api-key': 'atr_live_0123456789abcdef0123456789abcdef_abcdef',
            accept: 'application/json',
          },
        },
      },
      'incoming',
    );
    const out = lines.join('');
    expect(out).not.toContain('eyJ.secret.sig');
    expect(out).not.toContain('atr_live_0123');
    expect(out).toContain('application/json');
    expect(JSON.parse(lines[0]!).req.headers.authorization).toBe('[redacted]');
  });

  it('redacts passwords, secrets and tokens in logged objects', () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    log.info(
      {
        body: {
          password: 'hunter22',
          client_secret: 's3cr3t',
          refresh_token: 'rt-123',
          code_verifier: 'v'.repeat(43),
          handle: 'ada',
        },
      },
      'login',
    );
    const out = lines.join('');
    for (const secret of ['hunter22', 's3cr3t', 'rt-123', 'v'.repeat(43)]) expect(out).not.toContain(secret);
    expect(out).toContain('ada');
  });

  it("keeps an error's code: the fact an operator needs in an outage", () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    log.error({ err: refused }, 'webhook worker pass failed');
    log.warn(terminated, 'database unavailable');
    expect(JSON.parse(lines[0]!).err.code).toBe('ECONNREFUSED');
    expect(JSON.parse(lines[1]!).err.code).toBe('57P01');
    expect(lines.join('')).not.toContain('[redacted]');
  });

  it('redacts an authorization code wherever a request body or query carrying one is logged', () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    const code = 'c'.repeat(43);
    log.info({ body: { grant_type: 'authorization_code', code } }, 'token form');
    log.info({ query: { code, state: 'xyz' } }, 'redirect query');
    log.info({ form: { code }, params: { code } }, 'parsed');
    log.info({ req: { body: { code }, query: { code } } }, 'request');
    const out = lines.join('');
    expect(out).not.toContain(code);
    expect(JSON.parse(lines[0]!).body).toEqual({ grant_type: 'authorization_code', code: '[redacted]' });
    expect(JSON.parse(lines[1]!).query).toEqual({ code: '[redacted]', state: 'xyz' });
  });

  it("censors a driver error's row data and parameters, keeping what names the failure", () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    // The fields node-postgres's DatabaseError carries for a failed INSERT.
    const pgError = Object.assign(new Error('new row for relation "users" violates check constraint "y"'), {
      severity: 'ERROR',
      code: '23514',
      detail: 'Failing row contains (usr_1, ada@example.com, scrypt$32768$8$1$SALTSALT$HASH).',
      where: 'SQL statement "INSERT ... VALUES (\'whsec_abc\')"',
      internalQuery: "SELECT 'whsec_abc'",
      schema: 'public',
      table: 'users',
      column: 'first_name',
      constraint: 'y',
      routine: 'ExecConstraints',
    });
    const replyError = Object.assign(new Error('ERR wrong number of arguments'), {
      command: { name: 'set', args: ['cache:usr_1', '{"token":"TKN"}'] },
      parameters: ['whsec_param'],
    });
    log.error({ err: pgError }, 'unhandled error');
    log.error(new AggregateError([pgError, replyError], 'both failed'), 'grpc call failed');
    const out = lines.join('');
    for (const secret of ['Failing row', 'SALTSALT', 'whsec_', 'ada@example.com', 'TKN']) {
      expect(out).not.toContain(secret);
    }
    expect(JSON.parse(lines[0]!).err).toMatchObject({
      code: '23514',
      table: 'users',
      column: 'first_name',
      constraint: 'y',
      detail: '[redacted]',
      where: '[redacted]',
      internalQuery: '[redacted]',
      message: 'new row for relation "users" violates check constraint "y"',
    });
    const [first, second] = JSON.parse(lines[1]!).err.aggregateErrors;
    expect(first).toMatchObject({ code: '23514', detail: '[redacted]' });
    expect(second).toMatchObject({ command: { name: 'set', args: '[redacted]' }, parameters: '[redacted]' });
    // The error itself is left as it was: only its log line is censored.
    expect(pgError.detail).toContain('Failing row');
    expect(replyError.command.args).toHaveLength(2);
  });

  it('drops the value PostgreSQL quotes in a message about an input it could not read', () => {
    const { lines, stream } = capture();
    const log = createLogger('info', stream);
    const err = Object.assign(new Error('invalid input syntax for type integer: "atr_live_secretish"'), {
      severity: 'ERROR',
      code: '22P02',
    });
    log.error({ err }, 'unhandled error');
    expect(lines.join('')).not.toContain('secretish');
    const logged = JSON.parse(lines[0]!).err;
    expect(logged.message).toBe('invalid input syntax for type integer: [redacted]');
    expect(logged.stack).toContain('invalid input syntax for type integer: [redacted]');
    expect(logged.code).toBe('22P02');
  });

  it('censors credential headers quoted in text, in the forms grpc-js traces print them', () => {
    const key = 'atr_test_0123456789abcdef0123456789abcdef_abcdef';
    const json = `server_call | Request to /users.v1.UserService/GetUser received headers {"x-api-key":["${key}"],"Authorization":["Bearer eyJ.a.b","Bearer eyJ.c.d"],"cookie":["sid=S1"],"user-agent":["grpc-node-js/1.14.7"]}`;
    expect(redactHeaderText(json)).toBe(
      'server_call | Request to /users.v1.UserService/GetUser received headers {"x-api-key":["[redacted]"],"Authorization":["[redacted]"],"cookie":["[redacted]"],"user-agent":["grpc-node-js/1.14.7"]}',
    );
    const lines = `Received server headers:\n\t\t:status: 200\n\t\tX-Api-Key: ${key}\n\t\tauthorization: Bearer eyJ.e.f\n\t\tcontent-type: application/grpc\n`;
    expect(redactHeaderText(lines)).toBe(
      'Received server headers:\n\t\t:status: 200\n\t\tX-Api-Key: [redacted]\n\t\tauthorization: [redacted]\n\t\tcontent-type: application/grpc\n',
    );
    const inspected = `{ 'x-api-key': [ '${key}' ], authorization: 'Bearer eyJ.g.h', 'proxy-authorization': [ 'Basic Zm9v' ] }`;
    expect(redactHeaderText(inspected)).toBe(
      "{ 'x-api-key': [\"[redacted]\"], authorization: '[redacted]', 'proxy-authorization': [\"[redacted]\"] }",
    );
    expect(redactHeaderText('no credentials here: x-api-keys-count 2')).toBe(
      'no credentials here: x-api-keys-count 2',
    );
  });

  it('writes nothing below its level', () => {
    const { lines, stream } = capture();
    createLogger('silent', stream).error('not shown');
    expect(lines).toHaveLength(0);
  });
});
