// Loaded into a real atrium process with `NODE_OPTIONS=--import <this file>` (crash.ts). When a
// statement whose SQL matches ATRIUM_TEST_CRASH_AFTER (a regular expression) has run and its answer
// is back, the process writes one line to stderr and kills itself with SIGKILL: a crash in the
// middle of a write, with its transaction open. Nothing in the product changes; the database is the
// real one and gets no warning.
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import process from 'node:process';

const pattern = process.env.ATRIUM_TEST_CRASH_AFTER;
if (pattern) {
  const matches = new RegExp(pattern, 'i');
  const require = createRequire(import.meta.url);

  const crash = (sql) => {
    writeSync(2, `${JSON.stringify({ msg: 'crash after statement', sql: sql.slice(0, 200) })}\n`);
    process.kill(process.pid, 'SIGKILL');
    // SIGKILL ends the process; nothing after the statement may run meanwhile.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  };

  // better-sqlite3: statements are synchronous, so the crash follows the statement at once.
  const SQLite = require('better-sqlite3');
  const probe = new SQLite(':memory:');
  const Statement = Object.getPrototypeOf(probe.prepare('select 1'));
  probe.close();
  for (const name of ['run', 'all', 'get']) {
    const original = Statement[name];
    Statement[name] = function (...args) {
      const result = original.apply(this, args);
      if (matches.test(this.source)) crash(this.source);
      return result;
    };
  }

  // pg: the crash follows the server's answer, before the caller sees it.
  const pg = require('pg');
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, ...rest) {
    const result = query.call(this, config, ...rest);
    const sql = typeof config === 'string' ? config : config?.text;
    if (typeof sql === 'string' && matches.test(sql) && typeof result?.then === 'function') {
      return result.then((answer) => {
        crash(sql);
        return answer;
      });
    }
    return result;
  };
}
