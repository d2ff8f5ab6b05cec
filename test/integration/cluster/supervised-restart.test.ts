import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Restarted, UnexpectedExit } from '../../../src/cluster/cluster.js';
import { until } from '../../helpers/wait.js';
import { type Client, unary, userServiceClient } from '../grpc/support.js';
import { missingPrerequisite, OwnRedis, startTestCluster, type TestCluster } from './support.js';

/**
 * Two api and two grpc processes behind nginx, supervised as `atrium cluster` supervises them; one
 * process at a time is killed outright (SIGKILL) while clients keep calling through nginx's ports,
 * as users do. The supervisor takes it out of nginx's rotation as soon as it sees the exit and puts
 * it back once it is ready: nginx meets nothing of it while it is down (its error log names it
 * nowhere), no request fails, and once back it serves through nginx again.
 *
 * The restart delay is 5 s here (1 s by default): long enough that nginx, were the process left in
 * rotation, would try it again after its 2 s fail_timeout while it is still down, which is what the
 * error-log check would catch. Without the supervisor's out-of-rotation file, clients would see no
 * failure either (nginx sends a request it could not connect with to the other instance, gRPC calls
 * included, since nothing was sent): the error log is where the difference shows.
 */
const RESTART_DELAY_MS = 5_000;
/** After the exit is reported, what nginx may still have been connecting to when the file appeared. */
const SETTLE_MS = 200;

const skip = await missingPrerequisite();

type Event = (({ kind: 'exited' } & UnexpectedExit) | ({ kind: 'restarted' } & Restarted)) & { at: number };

/** One call through nginx: when it started and ended, and why it failed, if it did. */
interface Call {
  start: number;
  end: number;
  failure: string | undefined;
}

describe.skipIf(skip !== undefined)(
  'the cluster: a process killed outright is restarted without a failed request through nginx',
  { timeout: 180_000 },
  () => {
    let redis: OwnRedis;
    let env: TestCluster;
    const events: Event[] = [];
    let caller: { userId: string; headers: Record<string, string> };

    beforeAll(async () => {
      redis = await OwnRedis.start();
      env = await startTestCluster({
        layout: { api: 2, auth: 0, grpc: 2, worker: 0 },
        redisUrl: redis.url,
        restart: { initialDelayMs: RESTART_DELAY_MS },
      });
      env.cluster.supervise({
        exited: (e) => events.push({ kind: 'exited', ...e, at: Date.now() }),
        restarted: (r) => events.push({ kind: 'restarted', ...r, at: Date.now() }),
      });
      const handle = `k${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
      const user = await env.services.core.users.create({
        handle,
        email: `${handle}@example.com`,
        name: `Killed ${handle}`,
        role: 'member',
      });
      const key = await env.services.apiKeys.create({ userId: user.id, tier: 'enterprise' });
      caller = { userId: user.id, headers: { 'x-api-key': key.key } };
    }, 300_000);

    afterAll(async () => {
      await env?.stop();
      await redis?.stop();
    }, 60_000);

    const nginxLog = () => readFileSync(join(env.cluster.runDir, 'error.log'), 'utf8');

    /**
     * Kills process `name` with SIGKILL while `loops` clients call `call` through nginx back to back,
     * until it has been restarted and a few seconds more. Returns every call, the kill's time, the
     * supervisor's two reports and nginx's error-log lines naming `upstream` (the process's address in
     * nginx's upstream) from SETTLE_MS after the exit was reported until the restart was.
     */
    async function killUnderLoad(name: string, upstream: string, call: () => Promise<string | undefined>) {
      const calls: Call[] = [];
      let running = true;
      const loop = async () => {
        while (running) {
          const start = Date.now();
          let failure: string | undefined;
          try {
            failure = await call();
          } catch (err) {
            failure = (err as Error).message;
          }
          calls.push({ start, end: Date.now(), failure });
        }
      };
      const loops = [0, 1, 2, 3].map(loop);
      const mine = (kind: Event['kind']) => events.find((e) => e.kind === kind && e.name === name);
      try {
        await new Promise((r) => setTimeout(r, 1_000));
        const pid = env.cluster.process(name).child.pid!;
        const killedAt = Date.now();
        process.kill(pid, 'SIGKILL');
        await until(() => mine('exited') !== undefined, `${name}'s exit reported`);
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        const logFrom = nginxLog().length;
        await until(() => mine('restarted') !== undefined, `${name}'s restart reported`, 90_000);
        const seen = nginxLog()
          .slice(logFrom)
          .split('\n')
          .filter((l) => l.includes(upstream));
        // Back in rotation: calls go on a while, some of them to the restarted process.
        await new Promise((r) => setTimeout(r, 3_000));
        return {
          pid,
          killedAt,
          calls,
          exited: mine('exited') as Event & UnexpectedExit,
          restarted: mine('restarted') as Event & Restarted,
          nginxLines: seen,
        };
      } finally {
        running = false;
        await Promise.all(loops);
      }
    }

    /**
     * What every kill under load must show: the supervisor reported the SIGKILL and restarted the
     * process (a new pid) after the configured delay, and the clients kept calling through nginx
     * both while it was down and after it was back (more than 20 calls each).
     */
    function expectRestartedUnderLoad(run: Awaited<ReturnType<typeof killUnderLoad>>, role: string): void {
      expect(run.exited).toMatchObject({ role, signal: 'SIGKILL', exits: 1, restartInMs: RESTART_DELAY_MS });
      expect(run.restarted.pid).not.toBe(run.pid);
      const down = run.calls.filter((c) => c.start > run.exited.at && c.end < run.restarted.at);
      const after = run.calls.filter((c) => c.start > run.restarted.at);
      expect(down.length).toBeGreaterThan(20);
      expect(after.length).toBeGreaterThan(20);
    }

    /** The counter `metric` with every label in `labels`, as process `name` reports it itself. */
    async function counter(name: string, metric: string, labels: Record<string, string>): Promise<number> {
      const text = await (await fetch(`${env.cluster.process(name).url}/metrics`)).text();
      return text
        .split('\n')
        .filter(
          (l) =>
            l.startsWith(`${metric}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
        )
        .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    }

    it('api: no HTTP request through nginx fails while api-1 is down, starting, and back', async () => {
      const api1 = env.cluster.process('api-1');
      const run = await killUnderLoad('api-1', `127.0.0.1:${api1.spec.port}`, async () => {
        const res = await fetch(`${env.cluster.httpUrl}/v1/users/${caller.userId}`, {
          headers: caller.headers,
        });
        const body = (await res.json()) as { id?: string };
        if (res.status < 200 || res.status > 299) return `status ${res.status} ${JSON.stringify(body)}`;
        return body.id === caller.userId ? undefined : `another body: ${JSON.stringify(body)}`;
      });
      expectRestartedUnderLoad(run, 'api');
      // Every GET answered 2xx: before, during (nginx resends one it sent to the killed process, GET
      // being idempotent), while api-1 was down and after it was back.
      expect(run.calls.filter((c) => c.failure !== undefined)).toEqual([]);
      // nginx sent it nothing while it was down: no refused connection in its error log.
      expect(run.nginxLines).toEqual([]);
      // Back in rotation: the new process (its counters start at 0; the test never asks it directly)
      // served requests from nginx.
      expect(
        await counter('api-1', 'atrium_http_requests_total', {
          method: 'GET',
          route: '/v1/users/:user_id',
          status: '200',
        }),
      ).toBeGreaterThan(0);
    });

    it('grpc: no gRPC call through nginx sent once the exit is seen fails, and the restarted grpc-1 serves again', async () => {
      const grpc1 = env.cluster.process('grpc-1');
      const clients: Client[] = [0, 1, 2, 3].map(() => userServiceClient(env.cluster.grpcAddress));
      let next = 0;
      try {
        const run = await killUnderLoad('grpc-1', `127.0.0.1:${grpc1.spec.grpcPort}`, async () => {
          const client = clients[next++ % clients.length]!;
          const { error, value } = await unary<{ id: string }>(
            client,
            'GetUser',
            { user_id: caller.userId },
            caller.headers,
            { deadline: Date.now() + 30_000 },
          );
          if (error) return `${error.code} ${error.details}`;
          return value?.id === caller.userId ? undefined : `another user: ${JSON.stringify(value)}`;
        });
        expectRestartedUnderLoad(run, 'grpc');
        // A call that reached grpc-1 before it died cannot be saved: every gRPC call is a POST, which
        // nginx never sends again once sent (a SIGKILL takes a few ms to end a process, so calls sent
        // just after the kill may be among them). Every call sent once its exit was seen succeeded:
        // nginx sent none of them to grpc-1, and none before the kill failed.
        const lost = run.calls.filter((c) => c.failure !== undefined);
        console.error(
          `grpc-1 killed: ${run.calls.length} calls, ${lost.length} lost in flight, ` +
            `exit seen ${run.exited.at - run.killedAt} ms after the kill`,
        );
        expect(lost.filter((c) => c.start >= run.exited.at || c.end < run.killedAt)).toEqual([]);
        expect(run.nginxLines).toEqual([]);
        expect(
          await counter('grpc-1', 'atrium_grpc_server_handled_total', {
            grpc_method: 'GetUser',
            grpc_code: 'OK',
          }),
        ).toBeGreaterThan(0);
      } finally {
        for (const c of clients) c.close();
      }
    });
  },
);
