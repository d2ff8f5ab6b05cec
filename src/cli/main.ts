import { loadConfig } from '../config/load.js';
import { closeServices, createServices } from '../compose.js';
import { ADMIN_COMMANDS } from './commands.js';
import { printResult, reportFailure, UsageError } from './io.js';
import { runMigrate } from './migrate.js';
import { runSeed } from './seed.js';
import { runServe } from './serve.js';
import { runCluster } from './cluster.js';

/** The commands that run the service or its data, beside the admin commands' own synopses. */
const SERVICE_COMMANDS: Record<string, { synopsis: string; what: string }> = {
  serve: {
    synopsis: 'serve [--role api|auth|grpc|worker[,...]]',
    what: 'run the service (default: every role)',
  },
  migrate: { synopsis: 'migrate', what: 'apply database migrations' },
  seed: { synopsis: 'seed [--size small|large]', what: 'load demo data; prints the secrets once' },
  cluster: {
    synopsis:
      'cluster [--http-port P] [--grpc-port P] [--base-port P] [--host H] [--database-url URL] [--redis-url URL]\n' +
      '          [--nginx PATH] [--api N] [--auth N] [--grpc N] [--worker N] [--print-nginx]',
    what: 'the deployment layout behind nginx (docs/deployment.md)',
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
  const admin = ADMIN_COMMANDS[`${first} ${second ?? ''}`.trim()];
  if (wantsHelp(argv.slice(1))) {
    // `atrium users --help`: every command of that group.
    const group = Object.entries(ADMIN_COMMANDS).filter(([name]) => name.startsWith(`${first} `));
    const synopses = service || admin ? [(service ?? admin)!.synopsis] : group.map(([, c]) => c.synopsis);
    if (synopses.length > 0) {
      process.stdout.write(`${synopses.map((s) => `usage: atrium ${s}`).join('\n')}\n`);
      return 0;
    }
  }
  try {
    if (first === 'serve') return await runServe(argv.slice(1));
    if (first === 'migrate') return await runMigrate(argv.slice(1));
    if (first === 'seed') return await runSeed(argv.slice(1));
    if (first === 'cluster') return await runCluster(argv.slice(1));
    if (!admin) {
      const name = second === undefined || second.startsWith('-') ? first : `${first} ${second}`;
      throw new UsageError(`unknown command "${name}"; run "atrium --help"`);
    }
    const config = loadConfig();
    const services = await createServices(config, { migrate: true });
    try {
      printResult(await admin.run(services, rest));
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
