import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { root } from './cli.js';

export interface Served {
  child: ChildProcess;
  /** The HTTP base URL, when the roles include api or auth. */
  url: string | undefined;
  /** The gRPC address, when the roles include grpc. */
  grpc: string | undefined;
  stderr: () => string;
  /** SIGKILL, and wait for the process to be gone. */
  kill9(): Promise<void>;
  /** SIGTERM, and wait for the drain to finish. */
  stop(): Promise<number | null>;
}

export interface ServeOptions {
  /** `--role`; without it the command runs every role, as `npm start` does. */
  roles?: string;
  /**
   * As `npm start` runs it: the built CLI (`bin/atrium.js`; call `ensureBuilt()` first), in `cwd`,
   * with nothing in its environment but PATH and `env`. Otherwise the sources through tsx from the
   * checkout, in test mode, logging at info on 127.0.0.1 with PORT and GRPC_PORT 0 (so test files
   * running side by side never meet on gRPC's default 50051).
   */
  asUser?: { cwd: string };
}

/** Runs `atrium serve` as a real child process and waits until it says it started. */
export async function serve(env: Record<string, string>, options: ServeOptions = {}): Promise<Served> {
  const role = options.roles === undefined ? [] : ['--role', options.roles];
  const child = options.asUser
    ? spawn(process.execPath, [join(root, 'bin/atrium.js'), 'serve', ...role], {
        cwd: options.asUser.cwd,
        env: { PATH: process.env.PATH ?? '', ...env },
        stdio: ['ignore', 'ignore', 'pipe'],
      })
    : spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', ...role], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          NODE_ENV: 'test',
          LOG_LEVEL: 'info',
          HOST: '127.0.0.1',
          PORT: '0',
          GRPC_PORT: '0',
          ...env,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const started = await new Promise<{ http?: string; grpc?: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`atrium serve did not start:\n${stderr}`)), 30_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      for (const line of stderr.split('\n')) {
        if (!line.includes('"atrium started"')) continue;
        clearTimeout(timer);
        resolve(JSON.parse(line) as { http?: string; grpc?: string });
        return;
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`atrium serve exited with ${code}:\n${stderr}`));
    });
  });
  return {
    child,
    url: started.http,
    grpc: started.grpc,
    stderr: () => stderr,
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
