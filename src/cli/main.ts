import { loadConfig } from '../config/load.js';
import { closeServices, createServices } from '../compose.js';
import { MissingId } from './args.js';
import { ADMIN_COMMANDS, type AdminJob } from './commands.js';
import { printResult, reportFailure, UsageError } from './io.js';
import { runMigrate } from './migrate.js';
import { runSeed } from './seed.js';
import { runServe } from './serve.js';
import { runCluster } from './cluster.js';

/** The commands that run the service or its data; each reads its own configuration. */
interface ServiceCommand {
  synopsis: string;
  what: string;
  run: (argv: string[]) => Promise<number>;
}

const SERVICE_COMMANDS: Record<string, ServiceCommand> = {
  serve: {
    synopsis: 'serve [--role api|auth|grpc|worker[,...]]',
    what: 'run the service (default: every role)',
    run: runServe,
  },
  migrate: { synopsis: 'migrate', what: 'apply database migrations', run: runMigrate },
  seed: {
    synopsis: 'seed [--size small|large]',
    what: 'load demo data; prints the secrets once',
    run: runSeed,
  },
  cluster: {
    synopsis:
      'cluster [--http-port P] [--grpc-port P] [--base-port P] [--host H] [--database-url URL] [--redis-url URL]\n' +
      '          [--nginx PATH] [--api N] [--auth N] [--grpc N] [--worker N] [--print-nginx]',
    what: 'the deployment layout behind nginx (docs/deployment.md)',
    run: runCluster,
  },
};

const USAGE = `usage: atrium <command> [options]
       atrium <command> --help

${Object.values(SERVICE_COMMANDS)
  .map((c) => `  ${c.synopsis}\n      ${c.what}`)
  .join('\n')}

Admin commands (decisions §2):
${Object.values(ADMIN_COMMANDS)
  .map((c) => `  ${c.synopsis}`)
  .join('\n')}

Configuration comes from the environment (README, "Configuration").
Every admin command prints one JSON object on stdout; logs go to stderr.
Exit status: 0 success, 1 failure, 2 bad usage.`;

const wantsHelp = (args: readonly string[]) => args.includes('--help') || args.includes('-h');

async function main(argv: string[]): Promise<number> {
  const [first, second, ...rest] = argv;
  // Asked for, help is the answer (stdout, 0); a missing command is bad usage (stderr, 2).
  if (first === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const service = SERVICE_COMMANDS[first];
  const admin = second === undefined ? undefined : ADMIN_COMMANDS[`${first} ${second}`];
  const named = service ?? admin;
  if (wantsHelp(argv.slice(1))) {
    // One command's synopsis, or for a group (`atrium users --help`) each of its commands'.
    const synopses = named
      ? [named.synopsis]
      : Object.entries(ADMIN_COMMANDS)
          .filter(([name]) => name.startsWith(`${first} `))
          .map(([, c]) => c.synopsis);
    if (synopses.length > 0) {
      process.stdout.write(`${synopses.map((s) => `usage: atrium ${s}`).join('\n')}\n`);
      return 0;
    }
  }
  try {
    if (service) return await service.run(argv.slice(1));
    if (!admin) {
      // A group on its own (`atrium users`, or with only flags): it needs one of its commands.
      const group = Object.keys(ADMIN_COMMANDS)
        .filter((name) => name.startsWith(`${first} `))
        .map((name) => name.slice(first.length + 1));
      if (group.length > 0 && (second === undefined || second.startsWith('-'))) {
        throw new UsageError(
          `"${first}" needs a subcommand: ${group.join(', ')}; run "atrium ${first} --help" for their options`,
        );
      }
      const name = second === undefined || second.startsWith('-') ? first : `${first} ${second}`;
      throw new UsageError(`unknown command "${name}"; run "atrium --help"`);
    }
    // Every argument is checked before the configuration is read or the database opened: bad
    // usage exits 2 without making ./data/atrium.db, migrating it, or trying to reach a server.
    let job: AdminJob;
    try {
      job = admin.prepare(rest);
    } catch (err) {
      throw err instanceof MissingId ? new UsageError(`usage: atrium ${admin.synopsis}`) : err;
    }
    const config = loadConfig();
    const services = await createServices(config, { migrate: true });
    try {
      printResult(await job(services));
    } finally {
      await closeServices(services);
    }
    return 0;
  } catch (err) {
    return reportFailure(err);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.exitCode = reportFailure(err);
  },
);
