import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';

/** A supervised child process whose output goes to a log file. */
export class Child {
  private process: ChildProcess | undefined;
  private exited: Promise<number | null> = Promise.resolve(null);
  private log: WriteStream | undefined;
  private stopRequested = false;
  /** Called when the process exits without stop() having asked it to (a crash, a kill from outside). */
  onUnexpectedExit: ((code: number | null, signal: NodeJS.Signals | null) => void) | undefined;

  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly logPath: string,
    private readonly cwd: string,
  ) {}

  get pid(): number | undefined {
    return this.process?.pid;
  }

  get running(): boolean {
    return this.process !== undefined && this.process.exitCode === null && this.process.signalCode === null;
  }

  start(): void {
    this.log ??= createWriteStream(this.logPath, { flags: 'a' });
    const child = spawn(this.command, this.args, {
      cwd: this.cwd,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(this.log, { end: false });
    child.stderr!.pipe(this.log, { end: false });
    this.process = child;
    this.stopRequested = false;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        resolve(code);
        if (!this.stopRequested) this.onUnexpectedExit?.(code, signal);
      });
      child.once('error', (err) => {
        this.log?.write(`${this.name}: could not start: ${err.message}\n`);
        resolve(null);
      });
    });
  }

  /** Resolves with the exit code once the process has ended (at once when it is not running). */
  whenExited(): Promise<number | null> {
    return this.exited;
  }

  /** Sends `signal`, then SIGKILL after `graceMs`; resolves when the process has exited. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 35_000): Promise<number | null> {
    const child = this.process;
    this.stopRequested = true;
    if (!child || !this.running) return this.exited;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves once the log is flushed and closed: its directory can go then. */
  closeLog(): Promise<void> {
    const log = this.log;
    this.log = undefined;
    if (!log || log.closed) return Promise.resolve();
    return new Promise((resolve) => {
      log.once('close', resolve);
      log.once('error', () => resolve());
      log.end();
    });
  }
}

/**
 * Polls `url` until it answers 200; throws after `timeoutMs` or when `alive()` turns false, and at
 * once when `foreign` finds that the answer came from someone else (it returns why).
 */
export async function waitForOk(
  url: string,
  timeoutMs: number,
  alive: () => boolean,
  foreign?: (res: Response) => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`exited before ${url} answered (${last})`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      const stranger = foreign?.(res);
      if (stranger !== undefined) throw new ForeignAnswer(`${url} ${stranger}`);
      if (res.status === 200) return;
      // /readyz's body names the dependency that is not ready (`"redis":"unavailable"`).
      last = `status ${res.status}${await bodyOf(res)}`;
    } catch (err) {
      if (err instanceof ForeignAnswer) throw err;
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms (${last})`);
}

class ForeignAnswer extends Error {}

/** The body of an answer as `: TEXT` on one line, cut at 500 characters; nothing when empty. */
async function bodyOf(res: Response): Promise<string> {
  const text = (await res.text().catch(() => '')).replace(/\s+/g, ' ').trim();
  if (text === '') return '';
  return `: ${text.length > 500 ? `${text.slice(0, 500)}...` : text}`;
}
