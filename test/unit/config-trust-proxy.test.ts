import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/schema.js';

const trust = (value: string | undefined) =>
  parseConfig(value === undefined ? {} : { TRUST_PROXY: value }).trustProxy;

describe('TRUST_PROXY', () => {
  it('is off unless set, and off for the words that say so', () => {
    for (const v of [undefined, '', 'off', 'false', 'OFF', '0', 'no']) expect(trust(v)).toBe(false);
  });

  it('takes a hop count from 1 to 10', () => {
    expect(trust('1')).toBe(1);
    expect(trust('10')).toBe(10);
  });

  it('takes addresses, CIDRs and the named ranges, comma-separated', () => {
    expect(trust('127.0.0.1')).toEqual(['127.0.0.1']);
    expect(trust(' 10.0.0.0/8 , 192.168.1.7,::1, fd00::/8 ,loopback,linklocal,uniquelocal')).toEqual([
      '10.0.0.0/8',
      '192.168.1.7',
      '::1',
      'fd00::/8',
      'loopback',
      'linklocal',
      'uniquelocal',
    ]);
  });

  it('refuses everything else with one line naming the variable, never trusting everyone', () => {
    for (const bad of [
      'true',
      'yes',
      '*',
      '11',
      '-1',
      '1.5',
      'nginx',
      '10.0.0.0/33',
      '::1/129',
      '10.0.0.1/8/1',
      '10.0.0/8',
      ',',
      '127.0.0.1,evil',
    ]) {
      let caught: unknown;
      try {
        parseConfig({ TRUST_PROXY: bad });
      } catch (err) {
        caught = err;
      }
      expect(caught, bad).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).variable).toBe('TRUST_PROXY');
    }
  });
});
