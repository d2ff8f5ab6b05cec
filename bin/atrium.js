#!/usr/bin/env node
// Runs the compiled CLI; `npm install` builds dist/ through the `prepare` script.
//
// Loading the modules takes a second or so. A SIGTERM or SIGINT meanwhile on `serve` or `cluster`
// must not kill the process with no line and status 143 (docs/deployment.md: a signal while either
// starts exits 0): nothing is served or started yet, so the start ends here, 0, with the command's
// own line (the log's shape for `serve`). These two listeners stay for the life of the process; the
// command takes over what a signal does through the desk left on globalThis (removing them instead
// lost a signal that arrived while the modules loaded: src/process/stop-signals.ts).
import process from 'node:process';

const STOPPED_EARLY = {
  serve: (signal) =>
    `${JSON.stringify({ level: 30, time: Date.now(), service: 'atrium', signal, msg: 'signal while starting; stopped before serving' })}\n`,
  cluster: () => 'atrium cluster: stopped before it was ready\n',
};

const stoppedEarly = Object.hasOwn(STOPPED_EARLY, process.argv[2] ?? '') ? STOPPED_EARLY[process.argv[2]] : undefined;
if (stoppedEarly) {
  let handler = (signal) => {
    process.stderr.write(stoppedEarly(signal));
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
