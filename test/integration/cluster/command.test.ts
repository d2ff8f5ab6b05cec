import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../../src/cluster/cluster.js';
import { runCli } from '../../helpers/cli.js';
import { freshDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { ensureBuilt } from '../../helpers/build.js';
import {
  freePorts,
  freeRun,
  locationBodyLimits,
  missingPrerequisite,
  NGINX,
  refusal,
  serverBodyLimits,
  until,
  withClusterCommand,
} from './support.js';

const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** Every process below `pid` (Linux: /proc/PID/task/TID/children). */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = readFileSync(`/proc/${p}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const c of children.trim().split(/\s+/).filter(Boolean).map(Number)) {
        found.push(c);
        walk(c);
      }
    }
  };
  walk(pid);
  return found;
}

/** Whether process `pid` still exists (a zombie counts as gone: it runs nothing). */
function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Cluster.start with one api process on `ports` (nginx's HTTP and gRPC, then the api's), against a
 * fresh database that is dropped once `use` is done with the start.
 */
async function withOneApiCluster(
  [httpPort, grpcPort, api]: number[],
  nginxBinary: string | undefined,
  env: Record<string, string>,
  use: (started: Promise<Cluster>) => Promise<void>,
): Promise<void> {
  const database = await freshDatabase({ adminUrl: ADMIN_URL });
  try {
    await use(
      Cluster.start({
        databaseUrl: database.url,
        redisUrl: TEST_REDIS_URL,
        layout: { api: 1, auth: 0, grpc: 0, worker: 0 },
        httpPort: httpPort!,
        grpcPort: grpcPort!,
        ports: [api!],
        nginxBinary,
        env: { LOG_LEVEL: 'warn', ...env },
      }),
    );
  } finally {
    await database.drop();
  }
}

// Nothing listens on port 1: a check that reached the database would fail there, not where asked.
const UNREACHABLE_DB = 'postgres://postgres@127.0.0.1:1/x';

describe(
  'atrium cluster refuses a plan that cannot work before it starts anything',
  { timeout: 60_000 },
  () => {
    it('two of its own listeners on one port, naming both settings', async () => {
      const [base] = await freePorts(1);
      // auth-1 is base + 2 in the reference layout; nginx's HTTP listener asked for the same port.
      const overlap = refusal(
        await runCli(
          [
            'cluster',
            '--base-port',
            String(base),
            '--http-port',
            String(base! + 2),
            '--database-url',
            UNREACHABLE_DB,
          ],
          {},
        ),
      );
      expect(overlap).toMatchObject({
        code: 1,
        error: 'invalid_configuration',
        variable: 'CLUSTER_BASE_PORT',
      });
      expect(overlap.message).toContain('CLUSTER_HTTP_PORT');
      expect(overlap.message).toContain('auth-1');
      const same = refusal(
        await runCli(
          [
            'cluster',
            '--http-port',
            String(base),
            '--grpc-port',
            String(base),
            '--database-url',
            UNREACHABLE_DB,
          ],
          {},
        ),
      );
      expect(same).toMatchObject({ code: 1, error: 'invalid_configuration', variable: 'CLUSTER_GRPC_PORT' });
      expect(same.message).toContain('CLUSTER_HTTP_PORT');
    });

    it('a base port that runs past 65535', async () => {
      const over = refusal(
        await runCli(['cluster', '--base-port', '65500', '--database-url', UNREACHABLE_DB], {}),
      );
      expect(over).toMatchObject({ code: 1, error: 'invalid_configuration', variable: 'CLUSTER_BASE_PORT' });
      expect(over.message).toContain('65535');
    });
  },
);

describe('atrium cluster --print-nginx', { timeout: 60_000 }, () => {
  it("renders the HTTP server's body limit above the BODY_LIMIT_BYTES the instances would get, none for gRPC", async () => {
    const result = await runCli(['cluster', '--print-nginx'], { BODY_LIMIT_BYTES: '3145728' });
    expect(result.code, result.stderr).toBe(0);
    // gRPC's 0: the grpc instance limits each message itself (nginx-config.ts).
    expect(serverBodyLimits(result.stdout)).toEqual([[4194304], [0]]);
    // The gRPC error pages' own `client_max_body_size 0` (no limit) lets them answer a refused body.
    expect(
      locationBodyLimits(result.stdout)
        .flat()
        .filter((n) => n !== 0),
    ).toEqual([]);
  });
});

describe(
  'atrium cluster names the setting of a bad input before it starts anything',
  { timeout: 90_000 },
  () => {
    it('refuses each with one line: a flag as bad usage, a variable as invalid_configuration', async () => {
      const [httpPort, grpcPort, closed] = await freePorts(3);
      const base = await freeRun(7);
      const ports = {
        CLUSTER_HTTP_PORT: String(httpPort),
        CLUSTER_GRPC_PORT: String(grpcPort),
        CLUSTER_BASE_PORT: String(base),
      };
      // Every check below comes before the database, which would refuse the start otherwise.
      const unreachable = { ...ports, CLUSTER_DATABASE_URL: UNREACHABLE_DB };
      const cases: [string[], Record<string, string>, object, string][] = [
        // Nothing listens on `closed`: the server does not answer.
        [
          [],
          { ...ports, CLUSTER_DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/x` },
          { code: 1, error: 'invalid_configuration', variable: 'CLUSTER_DATABASE_URL' },
          'ECONNREFUSED',
        ],
        [['--nginx', '/nonexistent/nginx'], unreachable, { code: 2, error: 'usage' }, '--nginx'],
        [['--nginx', ''], unreachable, { code: 2, error: 'usage' }, '--nginx'],
        [
          [],
          { ...unreachable, CLUSTER_NGINX: '/nonexistent/nginx' },
          { code: 1, error: 'invalid_configuration', variable: 'CLUSTER_NGINX' },
          'ENOENT',
        ],
        [
          [],
          { ...unreachable, CLUSTER_REDIS_URL: 'http://x' },
          { code: 1, error: 'invalid_configuration', variable: 'CLUSTER_REDIS_URL' },
          'redis://',
        ],
        [['--host', ''], unreachable, { code: 2, error: 'usage' }, '--host'],
        [['--print-nginx', '--host', 'bad host;'], {}, { code: 2, error: 'usage' }, '--host'],
        [
          [],
          { ...unreachable, CLUSTER_HTTP_PORT: 'abc' },
          { code: 1, error: 'invalid_configuration', variable: 'CLUSTER_HTTP_PORT' },
          'a port 1-65535',
        ],
        [['--http-port', 'abc'], unreachable, { code: 2, error: 'usage' }, '--http-port'],
        // nginx's body limit is rendered from it: a bad one is refused, not rendered.
        [
          ['--print-nginx'],
          { BODY_LIMIT_BYTES: '2mb' },
          { code: 1, error: 'invalid_configuration', variable: 'BODY_LIMIT_BYTES' },
          'an integer number of bytes',
        ],
      ];
      const results = await Promise.all(cases.map(([args, env]) => runCli(['cluster', ...args], env)));
      results.forEach((result, i) => {
        const [args, env, expected, text] = cases[i]!;
        const line = refusal(result);
        expect(line, JSON.stringify({ args, env })).toMatchObject(expected);
        expect(line.message, JSON.stringify({ args, env })).toContain(text);
      });
    });
  },
);

describe('atrium cluster with its processes', { timeout: 240_000 }, () => {
  let skip: string | undefined;
  let dir: string;
  beforeAll(async () => {
    skip = await missingPrerequisite();
    dir = mkdtempSync(join(tmpdir(), 'atrium-cluster-command-'));
    if (!skip) ensureBuilt();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is not ready while something other than its nginx answers on the HTTP port', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    const ports = await freePorts(3);
    // A stand-in for nginx that answers /healthz 200 itself, as a backend on that port would.
    const fake = join(dir, 'not-nginx');
    writeFileSync(
      fake,
      `#!/bin/sh\nexec ${process.execPath} -e 'require("node:http").createServer((q, r) => r.end("ok")).listen(${ports[0]}, "127.0.0.1")'\n`,
    );
    chmodSync(fake, 0o755);
    await withOneApiCluster(ports, fake, {}, async (started) => {
      await expect(started).rejects.toThrow(/without nginx's Server header/);
    });
  });

  it('is ready through its real nginx, whose body limit sits above the BODY_LIMIT_BYTES it runs with', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    // More than a fixed client_max_body_size of 2m would let through: nginx's must follow the api's.
    const limit = 3 * 1024 * 1024;
    let runDir = '';
    await withOneApiCluster(
      await freePorts(3),
      NGINX,
      { BODY_LIMIT_BYTES: String(limit) },
      async (started) => {
        const cluster = await started;
        runDir = cluster.runDir;
        try {
          expect((await fetch(`${cluster.httpUrl}/healthz`)).headers.get('server')).toBe('nginx');
          expect(existsSync(join(cluster.runDir, 'nginx.conf'))).toBe(true);
          const post = (bytes: number) =>
            fetch(`${cluster.httpUrl}/graphql`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: Buffer.alloc(bytes, 'a'),
            });
          // The api's answers carry its security headers; nginx's own pages do not. (Just over the
          // limit is not asserted at this size: the api answers 413 and closes while nginx is still
          // writing the 3 MiB, and nginx turns the reset into a 502.)
          const atLimit = await post(limit);
          expect(atLimit.status).not.toBe(413);
          expect(atLimit.headers.get('x-frame-options')).toBe('DENY');
        } finally {
          await cluster.stop();
        }
      },
    );
    // The temporary directory it made (logs, nginx's config and prefix) goes with it.
    expect(existsSync(runDir)).toBe(false);
  });
  it('a SIGTERM while it starts stops every process it has started, then exits 0', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    // A stand-in for nginx that never answers: the cluster stays in its start, every process up.
    const marker = join(dir, 'nginx-started');
    const fake = join(dir, 'silent-nginx');
    writeFileSync(
      fake,
      `#!/bin/sh\nexec ${process.execPath} -e 'require("node:fs").writeFileSync(${JSON.stringify(marker)}, ""); setInterval(() => {}, 1e6)'\n`,
    );
    chmodSync(fake, 0o755);
    await withClusterCommand(
      { layout: { api: 1, auth: 0, grpc: 0, worker: 1 }, args: ['--nginx', fake] },
      async (run) => {
        await until(() => existsSync(marker) || run.child.exitCode !== null);
        expect(existsSync(marker), run.out.stderr).toBe(true);
        const started = descendants(run.child.pid!);
        // api-1, worker-1 and the stand-in.
        expect(started.length).toBeGreaterThanOrEqual(3);
        run.child.kill('SIGTERM');
        expect(await run.exited, run.out.stderr).toBe(0);
        expect(run.out.stdout).toBe('');
        expect(started.filter(alive)).toEqual([]);
      },
    );
  });

  // docs/deployment.md: a signal at any moment of the start exits 0 with one line. Until 2026-11-29
  // the handlers came after the modules had loaded and the inputs were checked: a SIGTERM in the
  // first 2.5 s or so killed the command with status 143 and no line.
  for (const [signal, afterMs] of [
    ['SIGTERM', 300],
    ['SIGINT', 300],
    ['SIGTERM', 1_500],
  ] as const) {
    it(`a ${signal} ${afterMs} ms after it is run (modules loading, inputs being checked) exits 0 with its line`, async ({
      skip: skipIt,
    }) => {
      if (skip) skipIt();
      // A stand-in for nginx that never answers: a signal that comes late still meets a start.
      const fake = join(dir, 'silent-nginx-early');
      writeFileSync(fake, `#!/bin/sh\nexec ${process.execPath} -e 'setInterval(() => {}, 1e6)'\n`);
      chmodSync(fake, 0o755);
      await withClusterCommand(
        { layout: { api: 1, auth: 0, grpc: 0, worker: 0 }, args: ['--nginx', fake] },
        async (run) => {
          const seen = new Set<number>();
          const watch = setInterval(() => descendants(run.child.pid!).forEach((p) => seen.add(p)), 20);
          try {
            await new Promise((r) => setTimeout(r, afterMs));
            run.child.kill(signal);
            const code = await run.exited;
            expect({ code, signal: run.child.signalCode }, run.out.stderr).toEqual({ code: 0, signal: null });
          } finally {
            clearInterval(watch);
          }
          expect(run.out.stderr).toContain('atrium cluster: stopped before it was ready\n');
          expect(run.out.stdout).toBe('');
          expect([...seen].filter(alive)).toEqual([]);
        },
      );
    });
  }

  it('restarts a process that exits by itself, with a growing delay, and says so; it serves again', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    await withClusterCommand({ layout: { api: 2, auth: 0, grpc: 0, worker: 0 } }, async (run) => {
      await run.printed();
      const ready = JSON.parse(run.out.stdout) as {
        http: string;
        logs: string;
        processes: { name: string; pid: number; url: string }[];
      };
      const api1 = ready.processes.find((p) => p.name === 'api-1')!;
      const lines = () => run.out.stderr.split('\n').filter((l) => l.includes('api-1 '));
      const pidOf = (line: string | undefined) => Number(/pid (\d+)/.exec(line ?? '')?.[1]);

      // Killed outright, by the PID the cluster printed (never a broad pattern).
      process.kill(api1.pid, 'SIGKILL');
      await until(() => lines().some((l) => l.includes('restarted')) || run.child.exitCode !== null);
      const [exited, back] = lines();
      expect(exited, run.out.stderr).toBe(
        `atrium cluster: api-1 (role api, port ${run.basePort}) exited with signal SIGKILL; ` +
          `restarting it in 1 s (exit 1 in a row); its log: ${ready.logs}/api-1.log`,
      );
      expect(back).toMatch(
        new RegExp(
          `^atrium cluster: api-1 \\(role api, port ${run.basePort}\\) restarted and ready, pid \\d+$`,
        ),
      );
      const pid = pidOf(back);
      expect(pid).not.toBe(api1.pid);
      expect(alive(pid)).toBe(true);
      // It serves again, on its own port and through nginx (which takes it back after fail_timeout).
      const direct = await fetch(`${api1.url}/readyz`);
      expect(direct.status).toBe(200);
      for (let i = 0; i < 4; i++) expect((await fetch(`${ready.http}/healthz`)).status).toBe(200);

      // A second exit soon after waits twice as long.
      process.kill(pid, 'SIGTERM');
      await until(() => lines().length >= 4 || run.child.exitCode !== null);
      expect(lines()[2]).toMatch(
        /exited with (signal SIGTERM|code 0); restarting it in 2 s \(exit 2 in a row\)/,
      );
      expect(pidOf(lines()[3])).not.toBe(pid);
      expect((await fetch(`${api1.url}/readyz`)).status).toBe(200);

      run.child.kill('SIGTERM');
      expect(await run.exited, run.out.stderr).toBe(0);
      // A process died: its log is worth reading, so the run directory stays, and it says where.
      const kept = /logs kept in (\S+)/.exec(run.out.stderr)?.[1];
      expect(kept, run.out.stderr).toBeDefined();
      expect(existsSync(join(kept!, 'logs', 'api-1.log'))).toBe(true);
      rmSync(kept!, { recursive: true, force: true });
      // Nothing of it is left running.
      expect(alive(pidOf(lines()[3]))).toBe(false);
    });
  });
  it('a cluster stopped by a signal leaves no run directory behind', async ({ skip: skipIt }) => {
    if (skip) skipIt();
    await withClusterCommand({ layout: { api: 1, auth: 0, grpc: 0, worker: 0 } }, async (run) => {
      await run.printed();
      const { logs } = JSON.parse(run.out.stdout) as { logs: string };
      expect(existsSync(logs)).toBe(true);
      run.child.kill('SIGTERM');
      expect(await run.exited, run.out.stderr).toBe(0);
      expect(existsSync(dirname(logs))).toBe(false);
    });
  });
  it('npm run cluster: a SIGTERM to npm stops the cluster it runs (the script execs node)', async ({
    skip: skipIt,
  }) => {
    if (skip) skipIt();
    await withClusterCommand(
      { layout: { api: 1, auth: 0, grpc: 0, worker: 0 }, via: 'npm' },
      async ({ child: npm, out, exited, printed }) => {
        await printed();
        expect(out.stdout, out.stderr).toContain('"http"');
        // node (the cluster), api-1 and nginx (master and workers) below npm.
        const started = descendants(npm.pid!);
        expect(started.length, out.stderr).toBeGreaterThanOrEqual(3);
        npm.kill('SIGTERM');
        await exited;
        await until(() => !started.some(alive));
        expect(out.stderr).toContain('atrium cluster: stopping');
      },
    );
  });
});
