import { loadConfig } from '../config/load.js';
import { refuseSharedPort } from '../config/schema.js';
import { createAtrium, SERVER_ROLES, type ServerRole } from '../compose.js';
import { parse } from './args.js';
import { UsageError } from './io.js';
import { claimSqlite } from '../process/sqlite-guard.js';
import { withoutPassword } from '../config/redact.js';
import { type StopSignal, stopOnSignals, watchStartSignals } from '../process/stop-signals.js';
import { createLogger } from '../observability/logger.js';
import { warnIfSunsetPassed } from '../http/rest/orders/deprecation.js';

export function parseRoles(value: string | undefined): ServerRole[] {
  if (value === undefined || value === 'all') return [...SERVER_ROLES];
  const roles = value.split(',').map((r) => r.trim());
  for (const r of roles) {
    if (!(SERVER_ROLES as readonly string[]).includes(r))
      throw new UsageError(`--role takes ${SERVER_ROLES.join('|')} (comma-separated) or all; got "${r}"`);
  }
  return roles as ServerRole[];
}

/**
 * Runs until SIGTERM or SIGINT, then drains and exits 0; a drain that fails exits 1, one still
 * running after 30 s or interrupted by the same signal again exits 1 at once.
 */
export async function runServe(argv: string[]): Promise<number> {
  const { values } = parse(argv, { role: { type: 'string' } });
  const roles = parseRoles(values.role);
  const config = loadConfig();
  // Serve binds PORT always and GRPC_PORT with the grpc role; the roles are known only here.
  refuseSharedPort(config, roles.includes('grpc'));
  const log = createLogger(config.logLevel);
  // From here to "atrium started" a SIGTERM or SIGINT ends the start with exit 0 and a log line.
  const start = watchStartSignals(log);
  const sqlite = claimSqlite(config.databaseUrl);
  const atrium = await createAtrium(config, roles, { logger: log, deferWork: true }).catch((err: unknown) => {
    sqlite?.release();
    throw err;
  });
  atrium.services.onClose.push(async () => sqlite?.release());
  // Built, and about to bind and start work: a signal from here closes all that (a connection
  // accepted meanwhile is answered) rather than cutting it short, once the step in progress is done.
  start.built();
  const abandon = (signal: StopSignal) =>
    stopOnSignals({ close: () => atrium.close(), logger: log, already: signal });
  // A port already taken must end the process, not leave it alive with its pools and no listener
  // (a supervisor waiting for readiness would wait forever).
  const failed = async (err: unknown) => {
    if (start.abandoned()) return undefined;
    await atrium.close();
    throw err;
  };
  const listening = await atrium.listen().catch(failed);
  let signal = start.abandoned();
  if (signal || !listening) return abandon(signal!);
  // The webhook worker and the purge job begin only now: nothing they claim is left behind by an
  // abandoned start (docs/webhooks.md, "Shutdown").
  await atrium.startWork().catch(failed);
  signal = start.abandoned();
  if (signal) return abandon(signal);
  const { httpUrl, grpcAddress } = listening;
  log.info(
    { roles, http: httpUrl, grpc: grpcAddress, database: withoutPassword(config.databaseUrl) },
    'atrium started',
  );
  // /api/v1 and its Sunset header are the api role's.
  if (roles.includes('api')) warnIfSunsetPassed(log, config.v1Sunset);
  // On SQLite no other process can serve the file, so no other process can be the worker.
  if (config.databaseUrl.startsWith('sqlite:') && !roles.includes('worker')) {
    log.warn(
      { roles },
      'no worker role on this SQLite database: webhook events wait in the outbox and the purge job does not run ' +
        'until a process with the worker role serves it (one process per SQLite file: add worker to --role)',
    );
  }

  // Takes the signals over from the start in the same step that logged "atrium started". The 30 s
  // limit and a second signal end the process whatever still holds it (src/process/stop-signals.ts).
  return stopOnSignals({ close: () => atrium.close(), logger: log });
}
