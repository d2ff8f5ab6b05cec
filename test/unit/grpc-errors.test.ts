import { Metadata, status } from '@grpc/grpc-js';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { serviceError, toServiceError } from '../../src/grpc/errors.js';
import { StoreOutageLog } from '../../src/store/outage-log.js';

const log = pino({ level: 'silent' });
const outage = new StoreOutageLog(log, 'requests');

describe('toServiceError', () => {
  it('keeps a status the pipeline chose (UNAVAILABLE while draining) instead of masking it as INTERNAL', () => {
    const base = new Metadata();
    base.set('x-request-id', 'req-1');
    const error = toServiceError(
      serviceError(status.UNAVAILABLE, 'The server is shutting down; retry.'),
      base,
      log,
      outage,
    );
    expect(error.code).toBe(status.UNAVAILABLE);
    expect(error.details).toBe('The server is shutting down; retry.');
    expect(error.metadata.get('x-request-id')).toEqual(['req-1']);
  });

  it('still masks an unknown error as INTERNAL and maps a core error by its code', () => {
    expect(toServiceError(new Error('boom: SELECT * FROM users'), new Metadata(), log, outage).code).toBe(
      status.INTERNAL,
    );
    expect(
      toServiceError(new DomainError('not_found', 'User not found.'), new Metadata(), log, outage).code,
    ).toBe(status.NOT_FOUND);
  });
});
