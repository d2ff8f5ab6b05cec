import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/schema.js';
import { listenRefusal } from '../../src/process/listen-errors.js';

const target = (portSetting: string, host: string, port: number) => ({
  host,
  port,
  portSetting,
  hostSetting: 'HOST',
});
const nodeError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('listenRefusal', () => {
  it('names the port variable for a taken or privileged port, HOST for a foreign address', () => {
    const taken = listenRefusal(
      nodeError('EADDRINUSE', 'listen EADDRINUSE'),
      target('PORT', '0.0.0.0', 3000),
    );
    expect(taken).toBeInstanceOf(ConfigError);
    expect(taken).toMatchObject({ variable: 'PORT', got: '3000' });
    const privileged = listenRefusal(
      nodeError('EACCES', 'listen EACCES'),
      target('GRPC_PORT', '0.0.0.0', 443),
    );
    expect(privileged).toMatchObject({ variable: 'GRPC_PORT', got: '443' });
    expect((privileged as Error).message).toContain('EACCES');
    const foreign = listenRefusal(
      nodeError('EADDRNOTAVAIL', 'listen EADDRNOTAVAIL'),
      target('PORT', '192.0.2.1', 3000),
    );
    expect(foreign).toMatchObject({ variable: 'HOST', got: '192.0.2.1' });
  });

  it("reads grpc-js's code from its message text, which has no code property", () => {
    const grpc = new Error(
      'No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use]',
    );
    expect(listenRefusal(grpc, target('GRPC_PORT', '127.0.0.1', 50051))).toMatchObject({
      variable: 'GRPC_PORT',
    });
  });

  it('passes any other failure through unchanged', () => {
    const other = nodeError('EMFILE', 'too many open files');
    expect(listenRefusal(other, target('PORT', '127.0.0.1', 3000))).toBe(other);
  });
});
