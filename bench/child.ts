import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Starts a server process for a benchmark and resolves with the first capture group of `ready`
 * (its URL or address) once its output shows it. Allowance: BENCH_START_TIMEOUT_MS (120 s).
 */
export function startChild(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    // BENCH_CPU_PROF=dir: every server writes a V8 CPU profile there when it exits (summarise one
    // with bench/cpuprofile-summary.ts).
    const profile = process.env.BENCH_CPU_PROF;
    const argv = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`, ...args] : args;
    const child = spawn(process.execPath, argv, {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`server did not start: ${out}`)),
      Number(process.env.BENCH_START_TIMEOUT_MS ?? 120_000),
    );
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (!m) return;
      clearTimeout(timer);
      // From here on the output (one access line per request) is drained and dropped, as a log
      // shipper would take it. Accumulating and re-scanning it cost this process more CPU with
      // every request and took it from the server and the load generator on the same cores.
      child.stdout!.off('data', onData).on('data', () => undefined);
      child.stderr!.off('data', onData).on('data', () => undefined);
      out = '';
      resolve({ child, url: m[1]! });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
}

/**
 * Stops the children and waits until they have exited. A serving process holds its SQLite file's
 * lock until it exits, so the next stage of a run can only start its own server after this.
 */
export async function stopChildren(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.splice(0).map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }),
    ),
  );
}
