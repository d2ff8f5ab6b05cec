#!/usr/bin/env node
// Runs the compiled CLI; `npm install` builds dist/ through the `prepare` script.
//
// Loading the modules takes a second or so. A SIGTERM or SIGINT meanwhile on `serve` must not kill
// the process with no log line and status 143 (README: SIGTERM exits 0): nothing is served yet, so
// the start ends here, 0, with a line in the log's shape. These two listeners stay for the life of
// the process; `serve` takes over what a signal does through the desk left on globalThis (removing
// them instead lost a signal that arrived while the modules loaded: src/process/stop-signals.ts).
import process from 'node:process';

if (process.argv[2] === 'serve') {
  let handler = (signal) => {
    process.stderr.write(
      `${JSON.stringify({ level: 30, time: Date.now(), service: 'atrium', signal, msg: 'signal while starting; stopped before serving' })}\n`,
    );
    process.exit(0);
  };
  const relay = (signal) => handler(signal);
  process.on('SIGTERM', relay);
  process.on('SIGINT', relay);
  globalThis[Symbol.for('atrium.stopSignalDesk')] = {
    take(next) {
      handler = next;
    },
  };
}
await import('../dist/cli/main.js');
