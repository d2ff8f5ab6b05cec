/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`, or BENCH_CPU_PROF=dir for bench servers)
 * by self time: the top functions, and the totals per package (node_modules/<pkg>, node: internals,
 * Atrium's own files, or V8's (garbage collector), (program) and (idle)).
 *
 *   node --import tsx bench/cpuprofile-summary.ts FILE.cpuprofile [TOP=30]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: cpuprofile-summary.ts FILE.cpuprofile [TOP]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

function packageOf(url: string, name: string): string {
  if (url === '') return name.startsWith('(') ? name : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return 'node:';
  const src = /\/(dist|src|bench)\/(.*)$/.exec(url);
  return src ? `atrium ${src[1]}/${src[2]!.split('/').slice(0, -1).join('/') || '.'}` : url;
}

const total = [...self.values()].reduce((a, b) => a + b, 0);
const perFunction = new Map<string, number>();
const perPackage = new Map<string, number>();
for (const [id, us] of self) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  const key = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '')}:${lineNumber + 1}`;
  perFunction.set(key, (perFunction.get(key) ?? 0) + us);
  const pkg = packageOf(url, functionName);
  perPackage.set(pkg, (perPackage.get(pkg) ?? 0) + us);
}
const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
const top = (m: Map<string, number>, n: number) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`)
    .join('\n');
console.log(
  `${file}: ${(total / 1e6).toFixed(1)} s sampled\n\nself time by package:\n${top(perPackage, 25)}`,
);
console.log(`\nself time by function:\n${top(perFunction, Number(topArg ?? 30))}`);
