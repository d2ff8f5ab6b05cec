import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';

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

  it('writes nothing below its level', () => {
    const { lines, stream } = capture();
    createLogger('silent', stream).error('not shown');
    expect(lines).toHaveLength(0);
  });
});
