import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type NotReady, type Restarted, type UnexpectedExit } from '../../../src/cluster/cluster.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';
import { TEST_REDIS_URL } from '../../helpers/redis.js';
import { until } from '../../helpers/wait.js';
import { freePorts, missingPrerequisite, NGINX } from './support.js';

const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A stand-in for the atrium CLI, so the supervisor's timings can be made small and a process can be
 * made never ready on demand: `migrate` exits 0; `serve` listens on PORT, answers /readyz 200, or
 * 503 forever when the file `<FAKE_DIR>/<PORT>.mode` said `never-ready` at its start (and then
 * ignores SIGTERM, so only SIGKILL ends it), and answers anything else 200 with `x-served-by:
 * <PORT> <pid>`; with `slow` it listens only 3 s after its start. Each start appends its pid to `<PORT>.pids`, each SIGTERM to `<PORT>.sigterm`.
 */
const FAKE_ATRIUM = `
const http = require('node:http');
const fs = require('node:fs');
if (process.argv[2] === 'migrate') process.exit(0);
const port = process.env.PORT;
const file = (ext) => process.env.FAKE_DIR + '/' + port + '.' + ext;
let mode = 'ready';
try { mode = fs.readFileSync(file('mode'), 'utf8').trim(); } catch {}
fs.appendFileSync(file('pids'), process.pid + '\\n');
process.on('SIGTERM', () => {
  fs.appendFileSync(file('sigterm'), process.pid + '\\n');
  if (mode !== 'never-ready') process.exit(0);
});
const server = http.createServer((req, res) => {
  if (req.url === '/readyz') {
    res.statusCode = mode === 'never-ready' ? 503 : 200;
    return res.end();
  }
  res.setHeader('x-served-by', port + ' ' + process.pid);
  res.end('ok');
});
setTimeout(() => server.listen(Number(port), process.env.HOST), mode === 'slow' ? 3000 : 0);
`;

const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
};

const skip = await missingPrerequisite();

describe.skipIf(skip !== undefined)(
  'the cluster supervisor, with stand-in processes behind the real nginx',
  { timeout: 60_000 },
  () => {
    let dir: string;
    let database: TestDatabase;
    let cluster: Cluster;
    /** What the supervisor reported, each with how many answers the client had had by then. */
    const events: ((
      | ({ kind: 'exited' } & UnexpectedExit)
      | ({ kind: 'restarted' } & Restarted)
      | ({ kind: 'notReady' } & NotReady)
    ) & { answered: number })[] = [];
    const answers: { status: number; servedBy: string }[] = [];
    const file = (port: number, ext: string) => join(dir, `${port}.${ext}`);
    const pids = (port: number) =>
      existsSync(file(port, 'pids'))
        ? readFileSync(file(port, 'pids'), 'utf8').trim().split('\n').map(Number)
        : [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'atrium-supervisor-'));
      writeFileSync(join(dir, 'fake-atrium.cjs'), FAKE_ATRIUM);
      database = await freshDatabase({ adminUrl: ADMIN_URL });
      const [httpPort, grpcPort, ...ports] = await freePorts(4);
      cluster = await Cluster.start({
        databaseUrl: database.url,
        redisUrl: TEST_REDIS_URL,
        layout: { api: 2, auth: 0, grpc: 0, worker: 0 },
        httpPort: httpPort!,
        grpcPort: grpcPort!,
        ports,
        nginxBinary: NGINX,
        command: [process.execPath, join(dir, 'fake-atrium.cjs')],
        env: { FAKE_DIR: dir },
        startTimeoutMs: 5_000,
        restart: { initialDelayMs: 300, maxDelayMs: 5_000, stopGraceMs: 500 },
      });
      cluster.supervise({
        exited: (e) => events.push({ kind: 'exited', ...e, answered: answers.length }),
        restarted: (r) => events.push({ kind: 'restarted', ...r, answered: answers.length }),
        notReady: (n) => events.push({ kind: 'notReady', ...n, answered: answers.length }),
      });
    }, 60_000);

    afterAll(async () => {
      await cluster?.stop();
      await database?.drop();
      rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it(
      'keeps a process that died out of rotation until it is ready again; one never ready is stopped ' +
        '(SIGTERM, then SIGKILL) and started again after the doubled delay',
      async () => {
        const [api1, api2] = cluster.role('api').map((p) => p.spec.port);
        const outFile = join(cluster.runDir, 'out-of-rotation', `127.0.0.1:${api1}`);
        const first = cluster.process('api-1').child.pid!;
        // Its next start will never be ready (it listens, and answers anything but /readyz).
        writeFileSync(file(api1!, 'mode'), 'never-ready');

        // A client through nginx for the whole time api-1 is down, starting or not ready.
        let sending = true;
        const client = (async () => {
          while (sending) {
            const res = await fetch(`${cluster.httpUrl}/api/v2/anything`);
            await res.text();
            answers.push({ status: res.status, servedBy: res.headers.get('x-served-by') ?? '' });
          }
        })();
        try {
          await until(() => answers.length > 20, 'answers through nginx before the kill');
          process.kill(first, 'SIGKILL');
          await until(() => events.some((e) => e.kind === 'exited'), 'the exit reported');
          expect(existsSync(outFile)).toBe(true);
          expect(events[0]).toMatchObject({ kind: 'exited', name: 'api-1', signal: 'SIGKILL', exits: 1 });
          expect(events[0]).toMatchObject({ restartInMs: 300 });

          // Started again, alive but never ready: after the start timeout it is stopped, SIGKILLed
          // since it ignores SIGTERM, and that counts as exit 2 in a row (twice the delay).
          await until(() => events.some((e) => e.kind === 'notReady'), 'the not-ready report', 10_000);
          const late = events.find((e) => e.kind === 'notReady') as NotReady;
          const stuck = pids(api1!)[1]!;
          expect(late).toMatchObject({
            name: 'api-1',
            pid: stuck,
            exits: 2,
            restartInMs: 600,
            stopGraceMs: 500,
          });
          expect(late.reason).toMatch(/status 503/);
          // Its next start will be ready.
          writeFileSync(file(api1!, 'mode'), 'ready');
          await until(() => !alive(stuck), 'the never-ready process gone', 5_000);
          expect(readFileSync(file(api1!, 'sigterm'), 'utf8')).toContain(String(stuck));
          // Still out of rotation while it is down again.
          expect(existsSync(outFile)).toBe(true);

          await until(() => events.some((e) => e.kind === 'restarted'), 'the restart reported', 10_000);
          const back = events.find((e) => e.kind === 'restarted') as Restarted & { answered: number };
          expect(pids(api1!)).toEqual([first, stuck, back.pid]);
          expect(existsSync(outFile)).toBe(false);
          const upTo = back.answered;

          // From the exit to the restart, nginx sent api-1 nothing, not even to the never-ready
          // process, which listened and would have answered: every answer is api-2's.
          const during = answers.slice(events[0]!.answered, upTo);
          expect(during.length).toBeGreaterThan(20);
          expect(during.filter((a) => a.status !== 200 || !a.servedBy.startsWith(`${api2} `))).toEqual([]);

          // Back in rotation: nginx sends it requests again.
          await until(
            () => answers.slice(upTo).some((a) => a.servedBy === `${api1} ${back.pid}`),
            'the restarted api-1 serving through nginx',
            5_000,
          );
          expect(answers.filter((a) => a.status !== 200)).toEqual([]);
          expect(events.map((e) => `${e.kind} ${e.name}`)).toEqual([
            'exited api-1',
            'notReady api-1',
            'restarted api-1',
          ]);
        } finally {
          sending = false;
          await client;
        }
      },
    );

    it('keeps one process per role out of rotation: when both died, the second gets the file once the first is back', async () => {
      const dirOut = join(cluster.runDir, 'out-of-rotation');
      const [api1, api2] = cluster.role('api').map((p) => p.spec.port);
      const from = events.length;
      // Every distinct set of files in the directory, in order, from now until both are back.
      const states: string[] = [];
      let watching = true;
      const watch = (async () => {
        while (watching) {
          const now = readdirSync(dirOut).sort().join(' ');
          if (states.at(-1) !== now) states.push(now);
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      // api-2 comes back 3 s later than it would: api-1 is back first.
      writeFileSync(file(api2!, 'mode'), 'slow');
      const restarted = (name: string) =>
        events.slice(from).some((e) => e.kind === 'restarted' && e.name === name);
      try {
        process.kill(cluster.process('api-1').child.pid!, 'SIGKILL');
        await until(() => events.slice(from).some((e) => e.kind === 'exited'), 'api-1 reported');
        process.kill(cluster.process('api-2').child.pid!, 'SIGKILL');
        await until(() => restarted('api-1') && restarted('api-2'), 'both restarted', 20_000);
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        watching = false;
        await watch;
      }
      expect(events.slice(from).map((e) => `${e.kind} ${e.name}`)).toEqual([
        'exited api-1',
        'exited api-2',
        'restarted api-1',
        'restarted api-2',
      ]);
      // api-1 out; api-2 down too, but nginx honours one file per role, and with both down there is
      // nowhere else to send requests: no second file. api-1 back: its file goes, api-2's comes.
      expect(states).toEqual(['', `127.0.0.1:${api1}`, `127.0.0.1:${api2}`, '']);
      // Both serve through nginx again.
      const servedBy = new Set<string>();
      await until(
        async () => {
          const res = await fetch(`${cluster.httpUrl}/api/v2/anything`);
          await res.text();
          expect(res.status).toBe(200);
          servedBy.add(res.headers.get('x-served-by')!.split(' ')[0]!);
          return servedBy.size === 2;
        },
        'both api processes serving through nginx',
        5_000,
      );
    });
  },
);
