import { describe, expect, it } from 'vitest';
import { StoreOutageLog } from '../../src/store/outage-log.js';
import { memoryLog } from '../helpers/memory-log.js';

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('StoreOutageLog', () => {
  it('logs an outage once, with message and code and no stack, and its end once', () => {
    const { lines, logger } = memoryLog('info');
    const outage = new StoreOutageLog(logger, 'webhook delivery');
    outage.answered();
    for (let i = 0; i < 76; i++) expect(outage.unreachable(refused())).toBe(true);
    expect(outage.unreachable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(outage.down).toBe(true);
    outage.answered();
    outage.answered();
    expect(outage.down).toBe(false);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 40,
      err: 'connect ECONNREFUSED 127.0.0.1:5432',
      code: 'ECONNREFUSED',
      msg: 'database unreachable: webhook delivery paused, retrying (not logged again until it answers)',
    });
    expect(JSON.stringify(lines[0])).not.toContain('stack');
    expect(lines[1]).toMatchObject({
      level: 40,
      failures: 77,
      msg: 'database answers again: webhook delivery resumed',
    });
  });

  it('leaves any other failure to the caller, to log in full', () => {
    const { lines, logger } = memoryLog('info');
    const outage = new StoreOutageLog(logger, 'webhook delivery');
    expect(outage.unreachable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
    expect(outage.unreachable(new TypeError('x is undefined'))).toBe(false);
    expect(outage.down).toBe(false);
    expect(lines).toHaveLength(0);
  });

  it('logs a second outage after the database answered in between', () => {
    const { lines, logger } = memoryLog('info');
    const outage = new StoreOutageLog(logger, 'webhook delivery');
    outage.unreachable(refused());
    outage.answered();
    outage.unreachable(Object.assign(new Error('terminating connection'), { code: '57P01' }));
    expect(lines.map((l) => l.code ?? l.msg)).toEqual([
      'ECONNREFUSED',
      'database answers again: webhook delivery resumed',
      '57P01',
    ]);
  });
});

describe('StoreOutageLog with wording of its own', () => {
  it('says what the component does meanwhile and afterwards, in the same two lines', () => {
    const { lines, logger } = memoryLog('info');
    const outage = new StoreOutageLog(logger, {
      down: 'requests answered 503',
      up: 'requests served again',
    });
    for (let i = 0; i < 3; i++) expect(outage.unreachable(refused())).toBe(true);
    outage.answered();
    expect(lines.map((l) => l.msg)).toEqual([
      'database unreachable: requests answered 503 (not logged again until it answers)',
      'database answers again: requests served again',
    ]);
    expect(lines[0]).toMatchObject({ level: 40, code: 'ECONNREFUSED' });
    expect(lines[1]).toMatchObject({ level: 40, failures: 3 });
  });
});
