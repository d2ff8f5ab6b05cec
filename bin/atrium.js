#!/usr/bin/env node
// Runs the compiled CLI; `npm install` builds dist/ through the `prepare` script.
//
// Loading the modules takes a second or so. A SIGTERM or SIGINT meanwhile on `serve` must not kill
// the process with no log line and status 143 (README: SIGTERM exits 0): nothing is served yet, so
// the start ends here, 0, with a line in the log's shape. `serve` takes the signals over itself as
// soon as it runs (src/process/stop-signals.ts, watchStartSignals).
import process from 'node:process';

if (process.argv[2] === 'serve') {
  const early = (signal) => {
    process.stderr.write(
      `${JSON.stringify({ level: 30, time: Date.now(), service: 'atrium', signal, msg: 'signal while starting; stopped before serving' })}\n`,
    );
    process.exit(0);
  };
  const onTerm = () => early('SIGTERM');
  const onInt = () => early('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  globalThis[Symbol.for('atrium.earlySignals')] = () => {
    process.off('SIGTERM', onTerm);
    process.off('SIGINT', onInt);
  };
}
await import('../dist/cli/main.js');
