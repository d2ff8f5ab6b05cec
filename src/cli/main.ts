import { loadConfig } from '../config/load.js';
import { closeServices, createServices } from '../compose.js';
import { ADMIN_COMMANDS } from './commands.js';
import { printResult, reportFailure, UsageError } from './io.js';
import { runMigrate } from './migrate.js';
import { runSeed } from './seed.js';
import { runServe } from './serve.js';
import { runCluster } from './cluster.js';

const USAGE = `usage: atrium <command> [options]

  serve [--role api|auth|grpc|worker[,...]]   run the service (default: every role)
  migrate                                      apply database migrations
  seed [--size small|large]                    load demo data; prints the secrets once
  cluster [--http-port P] [--api N ...]        the deployment layout behind nginx (docs/deployment.md)
${Object.keys(ADMIN_COMMANDS)
  .map((c) => `  ${c}`)
  .join('\n')}

Every admin command prints one JSON object on stdout; logs go to stderr.
Exit status: 0 success, 1 failure, 2 bad usage.`;

async function main(argv: string[]): Promise<number> {
  const [first, second, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    process.stderr.write(`${USAGE}\n`);
    return first === undefined ? 2 : 0;
  }
  try {
    if (first === 'serve') return await runServe(argv.slice(1));
    if (first === 'migrate') return await runMigrate(argv.slice(1));
    if (first === 'seed') return await runSeed(argv.slice(1));
    if (first === 'cluster') return await runCluster(argv.slice(1));
    const name = `${first} ${second ?? ''}`.trim();
    const command = ADMIN_COMMANDS[name];
    if (!command) throw new UsageError(`unknown command "${name}"; run "atrium --help"`);
    const config = loadConfig();
    const services = await createServices(config, { migrate: true });
    try {
      printResult(await command(services, rest));
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
