import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../helpers/serve.js';
import { until } from '../../helpers/wait.js';
import { unary, userServiceClient, type Client } from './support.js';

/**
 * With GRPC_TRACE on, grpc-js prints each call's metadata as text (`received headers
 * {"x-api-key":[...],"authorization":[...]}`), routed through pino as a plain string that the
 * field-based redaction never saw: the key and the token reached the log in clear (D11).
 */
describe('grpc-js traces in the log', { timeout: 60_000 }, () => {
  // Well formed, never issued: the trace is written as the call arrives, before any check.
  const key = 'atr_test_5ec4e7000000000000000000000000aa_0a0b0c';
  const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFjZWQifQ.TRACEDSIGNATURE';
  let served: Served;
  let client: Client;
  beforeAll(async () => {
    served = await serve(
      {
        DATABASE_URL: 'sqlite::memory:',
        GRPC_PORT: '0',
        GRPC_TRACE: 'all',
        GRPC_VERBOSITY: 'DEBUG',
        LOG_LEVEL: 'debug',
      },
      { roles: 'grpc' },
    );
    client = userServiceClient(served.grpc!);
  });
  afterAll(async () => {
    client?.close();
    await served?.stop();
  });

  it('censors the credentials of the metadata they quote', async () => {
    await unary(client, 'GetUser', { user_id: 'usr_x' }, { 'x-api-key': key });
    await unary(client, 'GetUser', { user_id: 'usr_x' }, { authorization: `Bearer ${token}` });
    // Each call's trace ends with its status, written after its headers.
    const ended = () => served.stderr().split('ended with status code: UNAUTHENTICATED').length - 1;
    await until(() => ended() >= 2, 'both calls traced to the end', 15_000);
    const log = served.stderr();
    const traced = log
      .split('\n')
      .filter((l) => l.includes('"component":"grpc-js"') && l.includes('received headers'));
    expect(traced, log).toHaveLength(2);
    expect(traced.join('\n')).toContain('[redacted]');
    expect(log).not.toContain(key);
    expect(log).not.toContain('5ec4e7');
    expect(log).not.toContain('TRACEDSIGNATURE');
  });
});
